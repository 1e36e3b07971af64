"""Money that does not match the quote is never silently lost: too much, too late, or on another network."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from orders.models import Reservation
from orders.orders import orders_expire_overdue
from payments.devnet import deploy_token
from payments.models import Asset, Credit, Network, Notice, PaymentRequest
from payments.rpc import RpcClient
from payments.scan import scan_network
from tests.payments.verification.chain import Wallet
from tests.payments.verification.conftest import Chain
from tests.payments.verification.helpers import order_of, order_steps, payment_of, payment_steps, units
from tests.servers import Anvil

BASE_CHAIN_ID = 8453


def expire_now(placed: dict) -> None:
    """The payment window ended a minute ago, and the beat task has expired the order."""
    past = timezone.now() - dt.timedelta(minutes=1)
    Reservation.objects.filter(order=order_of(placed)).update(expires_at=past)
    PaymentRequest.objects.filter(order=order_of(placed)).update(expires_at=past)
    orders_expire_overdue()


@pytest.fixture
def base_chain(chain, monkeypatch):
    """A second chain that answers as Base (chain id 8453), with a token registered as Base's USDC."""
    node = Anvil("--chain-id", str(BASE_CHAIN_ID))
    try:
        monkeypatch.setenv("CHAIN_RPC_URLS_BASE", node.url)
        contract = deploy_token(RpcClient([node.url]), name="USD Coin", symbol="USDC", decimals=6)
        Asset.objects.filter(network__slug="base", symbol="USDC").update(contract=contract)
        yield Chain(node=node, wallet=Wallet(node.url), usdc=contract)
    finally:
        node.stop()


def test_an_overpayment_pays_the_order_and_records_the_excess_for_refund(chain, customer, scan_pass, mailoutbox):
    # Given an order in USDC
    placed = customer.order()
    excess = 12_345_678

    # When the customer sends 12.345678 USDC more than quoted, and it becomes final
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) + excess)
    chain.mine(1)
    scan_pass()

    # Then the order is paid, the payment is overpaid, and exactly the excess is due back
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "overpaid")
    assert seen["payment"]["received_base_units"] == str(units(placed) + excess)
    assert [(due["asset"], due["base_units"]) for due in seen["payment"]["refunds_due"]] == [("USDC", str(excess))]
    assert payment_steps(placed) == [("pending", "overpaid")]
    # And the customer is told, in this order: the payment is confirmed, a refund of the excess is due
    assert [m.subject for m in mailoutbox][-2:] == [
        f"Order {placed['reference']}: payment confirmed",
        f"Order {placed['reference']}: a refund is due to you",
    ]


def test_a_payment_after_the_deadline_goes_to_review_as_late(chain, customer, scan_pass, mailoutbox):
    # Given an order whose payment window has ended
    placed = customer.order()
    payment = payment_of(placed)
    payment.expires_at = timezone.now() - dt.timedelta(minutes=5)
    payment.save(update_fields=["expires_at"])
    mailoutbox.clear()

    # When the full amount arrives now and becomes final
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()

    # Then the payment is late, the order needs a reviewer, and the customer is told not to send it again
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "late")
    assert Credit.objects.get(payment=payment).kind == "late"
    assert order_steps(placed)[-1] == ("awaiting_payment", "needs_review", "system")
    assert "after the deadline" in order_of(placed).events.last().reason
    assert [m.subject for m in mailoutbox] == [f"Order {placed['reference']}: your payment needs attention"]
    assert "arrived after the payment deadline" in mailoutbox[0].body
    assert "Do not send it again." in mailoutbox[0].body


def test_usdc_sent_on_another_network_to_the_orders_address_goes_to_review(
    chain, base_chain, customer, django_capture_on_commit_callbacks, mailoutbox
):
    # Given an order in USDC on the local chain
    placed = customer.order()
    mailoutbox.clear()

    # When the customer sends the amount to the same address, but on Base, and the verifier passes over Base
    sent = base_chain.wallet.pay_token(base_chain.usdc, placed["payment"]["address"], units(placed))
    with django_capture_on_commit_callbacks(execute=True):
        report = scan_network(network=Network.objects.get(slug="base"))

    # Then the transfer is credited as on the wrong network, with Base's chain id, and a reviewer decides
    assert report.credited == 1
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.chain_id, credit.network.slug, credit.kind) == (BASE_CHAIN_ID, "base", "wrong_network")
    assert (credit.tx_hash, credit.amount_base_units) == (sent.tx_hash.lower(), units(placed))
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "wrong_network")
    assert order_steps(placed)[-1] == ("awaiting_payment", "needs_review", "system")
    assert [m.subject for m in mailoutbox] == [f"Order {placed['reference']}: your payment needs attention"]
    assert "arrived on another network or in another token" in mailoutbox[0].body


def test_i_have_paid_with_a_hash_from_another_network_finds_the_transfer_there(chain, base_chain, customer):
    # Given an order in USDC on the local chain, paid by mistake on Base
    placed = customer.order()
    sent = base_chain.wallet.pay_token(base_chain.usdc, placed["payment"]["address"], units(placed))

    # When the customer presses "I have paid" with that transaction's hash
    response = customer.paid(placed, sent.tx_hash)

    # Then the check looks beyond the order's network, finds it on Base, and sends it to a reviewer
    assert response.status_code == 202
    notice = Notice.objects.get(payment=payment_of(placed))
    assert notice.result == f"found on Base in block {sent.block_number}"
    assert Credit.objects.get(payment=payment_of(placed)).chain_id == BASE_CHAIN_ID
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "wrong_network")


def test_usdt_sent_to_a_usdc_order_goes_to_review_as_the_wrong_token(chain, customer, scan_pass):
    # Given an order in USDC
    placed = customer.order()

    # When the customer sends the amount in USDT, to the same address on the same chain, and it becomes final
    chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()

    # Then the transfer is kept as evidence in the wrong token, not counted as paid, and a reviewer decides
    credit = Credit.objects.get(payment=payment_of(placed))
    assert (credit.kind, credit.asset.symbol) == ("wrong_asset", "USDT")
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "wrong_network")
    assert seen["payment"]["received_base_units"] == "0"


def test_money_arriving_after_the_order_expired_reaches_a_reviewer(chain, customer, scan_pass):
    # Given an order whose payment window ended, expired and its lot released
    placed = customer.order()
    expire_now(placed)
    assert order_of(placed).status == "expired"

    # When the full amount arrives and becomes final
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()

    # Then it is not lost: the payment is late and the order goes to review
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "late")
    assert order_steps(placed)[-1] == ("expired", "needs_review", "system")


def test_eth_sent_to_a_usdc_orders_address_is_found_by_the_scan_and_goes_to_review(chain, customer, scan_pass):
    # Given an order in USDC (and no order in ETH open on the chain)
    placed = customer.order()

    # When the customer sends ETH instead, to the same address, and it becomes final
    sent = chain.wallet.pay_native(placed["payment"]["address"], 10**18)
    chain.mine(1)
    scan_pass()

    # Then the scan keeps it as evidence in the wrong coin, and a reviewer decides
    credit = Credit.objects.filter(payment=payment_of(placed)).first()
    assert credit is not None, "the ETH on the deposit address was not found"
    assert (credit.kind, credit.asset.symbol, credit.tx_hash) == ("wrong_asset", "ETH", sent.tx_hash.lower())
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "wrong_network")


def test_eth_sent_on_another_network_to_an_eth_orders_address_is_found_by_the_scan(
    chain, base_chain, customer, django_capture_on_commit_callbacks
):
    # Given an order in ETH on the local chain
    placed = customer.order(asset="ETH")

    # When the customer sends the ETH on Base instead, to the same address, and the verifier passes over Base
    sent = base_chain.wallet.pay_native(placed["payment"]["address"], units(placed))
    base_chain.node.mine(1)
    with django_capture_on_commit_callbacks(execute=True):
        scan_network(network=Network.objects.get(slug="base"))

    # Then the transfer is kept as evidence on the wrong network, and a reviewer decides
    credit = Credit.objects.filter(payment=payment_of(placed)).first()
    assert credit is not None, "the ETH sent on Base to the deposit address was not found"
    assert (credit.chain_id, credit.kind, credit.tx_hash) == (BASE_CHAIN_ID, "wrong_network", sent.tx_hash.lower())
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("needs_review", "wrong_network")
