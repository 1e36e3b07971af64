"""Money leaving deposit addresses, on a real chain (anvil) with real tokens, signed with the deposit key.

The deposit addresses here derive from a test mnemonic's account xpub (the development xpub's mnemonic was
thrown away), so the tests hold the private keys a thief or the treasurer's signer would: every transfer out
is a real signed transaction, not an impersonated account.

The attacker's cases come first: a transfer to a stranger, a refund paid with the wrong amount or to another
address, coin taken from a native-coin order. Then what the shop expects: refunds sent and confirmed, sweeps.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command

from payments.models import Network, PaymentEvent, Refund, ScanCursor, Sweep, UnexpectedOutflow
from payments.networks import rpc_client
from payments.rpc import RpcClient
from payments.scan import scan_network
from payments.treasury import treasury_plan
from tests.payments.verification.chain import GAS, MAX_FEE
from tests.payments.verification.deposit_keys import (  # noqa: F401 - known_keys: an autouse fixture
    ACCOUNT,
    SECURITY,
    STRANGER,
    TREASURY,
    deposit_wallet,
    known_keys,
    paid,
)
from tests.payments.verification.helpers import payment_of, units
from tests.payments.verification.money_out import CUSTOMER_WALLET, EXCESS, overpaid, refund_approved, staff
from tests.payments.verification.rpc_proxy import RpcProxy
from tests.perf.bulk import FIRST_BULK_INDEX, open_orders_bulk
from tests.servers import rpc


def approved_refund(chain, customer, scan_pass, client) -> tuple[dict, Refund]:
    placed, refund = overpaid(chain, customer, scan_pass)
    refund_approved(client, placed, refund, staff("reviewer", "rita"))
    refund.refresh_from_db()
    assert refund.status == "approved"
    return placed, refund


def notes(placed: dict, kind: str) -> list[str]:
    return [e.reason for e in PaymentEvent.objects.filter(payment=payment_of(placed), reason__startswith=kind)]


def alerts() -> list:
    return [m for m in mail.outbox if SECURITY in m.to]


def rescan_from(block: int) -> None:
    ScanCursor.objects.filter(network__slug="local").update(next_block=block)


def test_a_transfer_with_the_deposit_key_to_a_stranger_is_flagged_once_to_staff_and_on_the_console(
    chain, customer, scan_pass, client
):
    # Given a paid USDC order, and someone who holds its deposit key
    placed = paid(chain, customer, scan_pass)
    thief = deposit_wallet(chain, placed)

    # When they send the money to an address of their own
    sent = thief.transfer(chain.usdc, STRANGER, units(placed))
    scan_pass()

    # Then it is recorded as an unexpected outflow, with an event, an email to staff, and on /ops/
    outflow = UnexpectedOutflow.objects.get()
    assert (outflow.payment, outflow.token_contract, outflow.to_address, int(outflow.amount_base_units)) == (
        payment_of(placed),
        chain.usdc.lower(),
        STRANGER.lower(),
        units(placed),
    )
    assert (outflow.tx_hash, outflow.block_number, outflow.acknowledged_at) == (
        sent.tx_hash.lower(),
        sent.block_number,
        None,
    )
    assert len(notes(placed, "unexpected_outflow")) == 1
    assert len(alerts()) == 1 and sent.tx_hash.lower() in alerts()[0].body
    call_command("add_staff", "olga", "--role", "operator", "--password", "a-long-operator-password")
    client.force_login(get_user_model().objects.get(username="olga"))
    console = client.get("/ops/").content.decode()
    assert "Unexpected outflows" in console and sent.tx_hash.lower() in console and placed["reference"] in console

    # When the same blocks are scanned again
    chain.mine(3)
    rescan_from(sent.block_number - 1)
    scan_pass()
    scan_pass()

    # Then it is still recorded once
    assert UnexpectedOutflow.objects.count() == 1
    assert len(notes(placed, "unexpected_outflow")) == 1 and len(alerts()) == 1
    assert not Sweep.objects.exists()

    # When an operator acknowledges it on the console, it leaves the console and the row says who
    answer = client.post(f"/ops/outflows/{outflow.pk}/acknowledge/")
    assert answer.status_code == 302
    outflow.refresh_from_db()
    assert outflow.acknowledged_by == "olga" and outflow.acknowledged_at is not None
    assert "Unexpected outflows" not in client.get("/ops/").content.decode()


def test_a_refund_paid_with_the_wrong_amount_or_to_another_address_is_unexpected_and_the_refund_stays_approved(
    chain, customer, scan_pass, client
):
    # Given an approved refund of 2.5 USDC to the customer's wallet
    placed, refund = approved_refund(chain, customer, scan_pass, client)
    signer = deposit_wallet(chain, placed)

    # When the deposit key sends one base unit less to the right address, and the exact amount to another one
    short = signer.transfer(chain.usdc, CUSTOMER_WALLET, EXCESS - 1)
    elsewhere = signer.transfer(chain.usdc, STRANGER, EXCESS)
    chain.mine(2)
    scan_pass()

    # Then neither is the refund: both are unexpected outflows, and the refund is still owed
    flagged = {(o.tx_hash, o.to_address, int(o.amount_base_units)) for o in UnexpectedOutflow.objects.all()}
    assert flagged == {
        (short.tx_hash.lower(), CUSTOMER_WALLET.lower(), EXCESS - 1),
        (elsewhere.tx_hash.lower(), STRANGER.lower(), EXCESS),
    }
    refund.refresh_from_db()
    assert (refund.status, refund.tx_hash, refund.block_number) == ("approved", "", None)
    assert len(notes(placed, "unexpected_outflow")) == 2 and not notes(placed, "refund_sent")
    assert len(alerts()) == 2


def test_native_coin_taken_from_a_native_order_is_flagged_and_the_rest_swept_to_the_treasury_is_a_sweep(
    chain, customer, scan_pass
):
    # Given a paid ETH order, and its deposit key (the coin for gas is the payment itself)
    placed = paid(chain, customer, scan_pass, asset="ETH")
    signer = deposit_wallet(chain, placed, gas=False)
    wei = units(placed)

    # When 0.001 ETH goes to a stranger, and the rest (less the fees) to the treasury
    taken = signer.send(to=STRANGER, value=10**15)
    rest = wei - 10**15 - 2 * GAS * MAX_FEE
    swept = signer.send(to=TREASURY, value=rest)
    scan_pass()

    # Then the stranger's is flagged, the treasury's is a sweep, and the fees are neither
    outflow = UnexpectedOutflow.objects.get()
    assert (outflow.tx_hash, outflow.token_contract, outflow.log_index, int(outflow.amount_base_units)) == (
        taken.tx_hash.lower(),
        "",
        -1,
        10**15,
    )
    sweep = Sweep.objects.get()
    assert (sweep.tx_hash, sweep.token_contract, int(sweep.amount_base_units), sweep.to_address) == (
        swept.tx_hash.lower(),
        "",
        rest,
        TREASURY.lower(),
    )
    assert len(notes(placed, "swept")) == 1 and len(notes(placed, "unexpected_outflow")) == 1
    assert len(alerts()) == 1

    # And the sweep becomes final by the network's rule (2 confirmations on the local chain)
    assert not sweep.final
    chain.mine(2)
    scan_pass()
    assert Sweep.objects.get().final


def test_a_token_sweep_to_the_treasury_is_recorded_once_and_its_gas_fee_is_not_an_outflow(chain, customer, scan_pass):
    # Given a paid USDC order
    placed = paid(chain, customer, scan_pass)
    signer = deposit_wallet(chain, placed)

    # When the treasurer's signer sweeps it to the treasury (paying gas in coin from the address)
    swept = signer.transfer(chain.usdc, TREASURY, units(placed))
    scan_pass()

    # Then a sweep is recorded with a `swept` event; the fee (coin that left) is not flagged
    sweep = Sweep.objects.get()
    assert (sweep.payment, sweep.tx_hash, sweep.token_contract, int(sweep.amount_base_units), sweep.block_number) == (
        payment_of(placed),
        swept.tx_hash.lower(),
        chain.usdc.lower(),
        units(placed),
        swept.block_number,
    )
    assert notes(placed, "swept") and len(notes(placed, "swept")) == 1
    assert not UnexpectedOutflow.objects.exists() and not alerts()

    # When scanned again: recorded once, and final after the confirmations
    chain.mine(2)
    rescan_from(swept.block_number - 1)
    scan_pass()
    assert Sweep.objects.count() == 1 and Sweep.objects.get().final
    assert len(notes(placed, "swept")) == 1


def test_an_approved_refund_paid_from_the_deposit_address_is_sent_then_confirmed_and_the_customer_emailed_once(
    chain, customer, scan_pass, client
):
    # Given an approved refund of the 2.5 USDC excess to the customer's wallet
    placed, refund = approved_refund(chain, customer, scan_pass, client)
    signer = deposit_wallet(chain, placed)

    # When the treasurer's signer pays it, exactly, from the deposit address
    sent = signer.transfer(chain.usdc, CUSTOMER_WALLET, EXCESS)
    scan_pass()

    # Then the refund is sent with its transaction, and a `refund_sent` event says so
    refund.refresh_from_db()
    assert (refund.status, refund.tx_hash, refund.block_number) == ("sent", sent.tx_hash.lower(), sent.block_number)
    assert len(notes(placed, "refund_sent")) == 1
    subject = f"Order {placed['reference']}: your refund is confirmed"
    assert subject not in [m.subject for m in mail.outbox]

    # When the confirmations come (and the chain is scanned again and again)
    chain.mine(2)
    scan_pass()
    scan_pass()

    # Then it is confirmed, the customer is emailed once, and nothing was flagged
    refund.refresh_from_db()
    assert refund.status == "confirmed"
    assert [(e.from_status, e.to_status) for e in refund.events.all()][-2:] == [
        ("approved", "sent"),
        ("sent", "confirmed"),
    ]
    assert [m.subject for m in mail.outbox].count(subject) == 1
    assert not UnexpectedOutflow.objects.exists() and not Sweep.objects.exists()


def test_a_reorg_that_takes_the_refunds_transfer_away_sends_it_back_to_approved(chain, customer, scan_pass, client):
    # Given an approved refund, paid, seen as sent
    placed, refund = approved_refund(chain, customer, scan_pass, client)
    signer = deposit_wallet(chain, placed)
    snapshot = rpc(chain.node.url, "evm_snapshot")
    signer.transfer(chain.usdc, CUSTOMER_WALLET, EXCESS)
    scan_pass()
    assert Refund.objects.get(pk=refund.pk).status == "sent"

    # When a reorg drops the block with its transfer (the chain goes on without it)
    rpc(chain.node.url, "evm_revert", [snapshot])
    chain.mine(3)
    scan_pass()

    # Then the refund is owed again, with no transaction
    refund.refresh_from_db()
    assert (refund.status, refund.tx_hash) == ("approved", "")
    assert [(e.from_status, e.to_status) for e in refund.events.all()][-1] == ("sent", "approved")


def test_a_provider_that_drops_a_sent_refunds_receipt_does_not_send_it_back_to_approved(
    chain, customer, scan_pass, client, monkeypatch
):
    # Given a refund seen as sent, and two providers: the first one drops its receipt (a lie, or a lagging node)
    placed, refund = approved_refund(chain, customer, scan_pass, client)
    sent = deposit_wallet(chain, placed).transfer(chain.usdc, CUSTOMER_WALLET, EXCESS)
    scan_pass()
    liar = RpcProxy(chain.node.url)
    try:
        liar.drop_receipts.add(sent.tx_hash.lower())
        monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"{liar.url},{chain.node.url}")

        # When a pass asks the liar first
        scan_pass()

        # Then the honest provider still has it: the refund stays sent, never owed again on one provider's word
        refund.refresh_from_db()
        assert (refund.status, refund.tx_hash) == ("sent", sent.tx_hash.lower())
    finally:
        liar.stop()


def counted_outflow_pass(chain, customer, *, open_orders: int, first_index: int) -> tuple[int, int]:
    """A pass over one paid order whose deposit key sends money to a stranger, among `open_orders` open
    orders: (JSON-RPC calls, outflows the pass recorded)."""
    import datetime as dt

    from django.utils import timezone

    from payments.models import Asset, PaymentRequest

    network = Network.objects.get(slug="local")
    PaymentRequest.objects.update(watch_until=timezone.now() - dt.timedelta(days=1))  # earlier runs: closed
    start = chain.head()
    placed = customer.order()
    usdc = Asset.objects.select_related("network").get(network__slug="local", symbol="USDC")
    open_orders_bulk(open_orders - 1, asset=usdc, first_index=first_index, start_block=start)
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    deposit_wallet(chain, placed).transfer(chain.usdc, STRANGER, units(placed))
    chain.mine(10)
    ScanCursor.objects.update_or_create(network=network, defaults={"next_block": start})
    client = rpc_client(network)
    report = scan_network(network=network, client=client)
    return client.calls, report.outflows


def test_watching_outflows_costs_no_rpc_call_per_open_order(chain, customer):
    calls_1, outflows_1 = counted_outflow_pass(chain, customer, open_orders=1, first_index=FIRST_BULK_INDEX)
    calls_100, outflows_100 = counted_outflow_pass(chain, customer, open_orders=100, first_index=FIRST_BULK_INDEX + 1)
    assert outflows_1 == outflows_100 == 1
    assert calls_100 == calls_1


def test_an_approved_refund_a_drained_address_cannot_cover_is_held_back_in_the_plan_with_why(
    chain, customer, scan_pass, client
):
    # Given an approved refund of the excess, then someone with the deposit key takes everything on the address
    placed, refund = approved_refund(chain, customer, scan_pass, client)
    thief = deposit_wallet(chain, placed)
    thief.transfer(chain.usdc, STRANGER, units(placed) + EXCESS)
    scan_pass()

    # When the treasurer asks for the plan
    treasurer = staff("treasurer", "tom")
    answer = client.get("/api/v1/treasury/plan/?network=local", headers={"Authorization": f"Token {treasurer}"})

    # Then the signer is given nothing to send from that address, and the treasurer is told why, with the figures
    assert answer.status_code == 200, answer.content
    plan = answer.json()
    assert plan["items"] == []
    assert plan["held_back"] == [
        {
            "address": payment_of(placed).address,
            "order": placed["reference"],
            "asset": "USDC",
            "contract": chain.usdc,
            "balance_base_units": 0,
            "owed_base_units": EXCESS,
            "reason": "approved refunds exceed the balance: a reviewer looks at the address first",
        }
    ]
    assert Refund.objects.get(pk=refund.pk).status == "approved"


class RecordingClient(RpcClient):
    """A real client to the real node that keeps the batches it sent: which addresses the plan read."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__(urls)
        self.sent: list = []

    def batch(self, calls, *args, **kwargs):
        self.sent.extend(calls)
        return super().batch(calls, *args, **kwargs)


def test_the_plan_does_not_read_an_address_the_books_show_emptied(chain, customer, scan_pass):
    # Given two paid orders, one of them swept to the treasury already (recorded by the scan)
    swept, waiting = paid(chain, customer, scan_pass), paid(chain, customer, scan_pass)
    deposit_wallet(chain, swept).transfer(chain.usdc, TREASURY, units(swept))
    scan_pass()
    assert Sweep.objects.get().payment == payment_of(swept)

    # When the plan is made
    client = RecordingClient([chain.node.url])
    plan = treasury_plan(network=Network.objects.get(slug="local"), client=client)

    # Then only the address that still holds money is read and planned: the plan's cost follows what is left to
    # collect, not every address the shop ever used
    read = " ".join(str(params).lower() for _method, params in client.sent)  # balanceOf carries it without 0x
    assert payment_of(swept).address.lower()[2:] not in read
    assert payment_of(waiting).address.lower()[2:] in read
    assert [item.order for item in plan.items] == [waiting["reference"]]
