"""An attacker's extensions: one awaiting payment per order, one check per "I have paid" press, a stranger's
junk token that cannot block paid days, and lateness judged by when the money arrived.

Before: 60 POSTs opened 60 extensions (60 addresses watched for a week), one press stored 61 verification
jobs, 1 unit of a self-made token after a full USDC payment sent the extension to a reviewer, and a
reviewer who came after the rental's end could not accept money that arrived in time.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.test import Client
from django.utils import timezone

from core.jobs.models import Job
from orders.extensions import extensions_expire_overdue
from orders.models import Extension, Order
from payments.models import Credit, CreditKind, Notice, PaymentRequest
from payments.notices import NOTICE_VERIFY
from payments.review import Decision, payment_review_decide
from provisioning.access import CREDIT_MATCH, grants_due
from provisioning.models import AccessGrant
from tests.payments.test_capacity_race import run_together
from tests.payments.verification.helpers import (
    ORDERS_URL,
    extend,
    paid_in_usdc,
    payment_of,
    rental_active,
    settle_rounds,
    units,
)
from tests.servers import rpc

race = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ATTEMPTS = 60


def _an_active_rental(chain, customer, scan_pass) -> tuple[dict, Order]:
    placed = paid_in_usdc(chain, customer, scan_pass)
    return placed, rental_active(placed)


def test_sixty_extend_requests_open_one_extension_and_the_rest_are_refused_naming_it(chain, customer, scan_pass):
    # Given an active rental
    placed, _order = _an_active_rental(chain, customer, scan_pass)
    watched = PaymentRequest.objects.count()

    # When the customer (or a script with the token) asks for 60 extensions in a row
    answers = [extend(customer, placed, duration_days=3) for _ in range(ATTEMPTS)]

    # Then one is opened, and each other request is a 409 that names it: its id, amount and address
    assert [answer.status_code for answer in answers] == [201] + [409] * (ATTEMPTS - 1)
    first = answers[0].json()
    payment = first["payment"]
    for refused in answers[1:]:
        body = refused.json()
        assert body["extension"]["id"] == first["id"] and body["extension"]["payment"] == payment
        assert f"Extension {first['id']} " in body["detail"] and payment["amount"] in body["detail"]
    # And one new address is watched, not sixty
    assert Extension.objects.count() == 1
    assert PaymentRequest.objects.count() == watched + 1


def test_once_the_open_extension_has_expired_another_can_be_asked_for(chain, customer, scan_pass):
    placed, _order = _an_active_rental(chain, customer, scan_pass)
    first = extend(customer, placed, duration_days=3).json()
    assert extend(customer, placed, duration_days=7).status_code == 409
    # Its payment window ends with nothing paid
    deadline = PaymentRequest.objects.get(extension_id=first["id"]).expires_at
    assert extensions_expire_overdue(now=deadline + dt.timedelta(seconds=1)) == 1

    again = extend(customer, placed, duration_days=7)
    assert again.status_code == 201, again.content
    assert Extension.objects.filter(status="awaiting_payment").count() == 1


def test_a_reported_extension_still_blocks_another(chain, customer, scan_pass):
    # "Awaiting payment" is awaiting_payment or payment_reported: pressing "I have paid" frees nothing
    placed, _order = _an_active_rental(chain, customer, scan_pass)
    first = extend(customer, placed, duration_days=3).json()
    customer.paid(placed)
    assert Extension.objects.get(pk=first["id"]).status == "payment_reported"
    refused = extend(customer, placed, duration_days=3)
    assert refused.status_code == 409 and refused.json()["extension"]["id"] == first["id"]


@race
def test_two_simultaneous_extend_requests_open_one_extension(chain, customer, scan_pass):
    # Given an active rental
    placed, _order = _an_active_rental(chain, customer, scan_pass)

    # When two requests for an extension arrive at the same instant
    def attempt():
        return Client().post(
            f"{ORDERS_URL}{placed['reference']}/extend/",
            {"duration_days": 3},
            content_type="application/json",
            headers={"X-Order-Token": placed["access_token"]},
        )

    results = run_together(attempt, contenders=2)

    # Then one is opened and the other refused, naming it
    assert not [result for result in results if isinstance(result, Exception)], results
    assert sorted(result.status_code for result in results) == [201, 409]
    opened = next(result for result in results if result.status_code == 201).json()
    refused = next(result for result in results if result.status_code == 409).json()
    assert refused["extension"]["id"] == opened["id"]
    assert Extension.objects.count() == 1


def test_the_order_pages_extend_form_shows_the_refusal_on_the_form(chain, customer, scan_pass):
    placed, _order = _an_active_rental(chain, customer, scan_pass)
    first = extend(customer, placed, duration_days=3).json()
    page_url = "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1]

    with customer.capture(execute=True):
        response = customer.client.post(f"{page_url}extend/", {"duration_days": 7, "payment_option": "local:USDC"})

    # The page comes back with the form and the refusal on it (not a redirect), and nothing is opened
    assert response.status_code == 409
    page = response.content.decode()
    form = page.split('class="extend-form"', 1)[1].split("</form>", 1)[0]
    assert f"Extension {first['id']} " in form and first["payment"]["amount"] in form
    assert Extension.objects.count() == 1


def test_one_i_have_paid_press_stores_one_verification_job_whatever_it_covers(chain, customer, scan_pass):
    # Given an active rental with an extension awaiting its payment, paid in full
    placed, order = _an_active_rental(chain, customer, scan_pass)
    ends_before = order.ends_at
    first = extend(customer, placed, duration_days=3).json()
    sent = chain.wallet.pay_token(chain.usdc, first["payment"]["address"], int(first["payment"]["amount_base_units"]))
    jobs, notices = Job.objects.filter(kind=NOTICE_VERIFY).count(), Notice.objects.count()

    # When the customer presses "I have paid" once, with the transaction's hash
    assert customer.paid(placed, sent.tx_hash).status_code == 202

    # Then one verification job is stored for the press, which still checks every item it covers
    assert Job.objects.filter(kind=NOTICE_VERIFY).count() == jobs + 1
    assert Notice.objects.count() == notices + 2  # the order's payment and the extension's: each has its notice
    seen = customer.read(placed)["extensions"][0]
    assert (seen["status"], seen["payment"]["status"]) == ("payment_reported", "detected")
    settle_rounds(chain, scan_pass)
    assert Extension.objects.get(pk=first["id"]).status == "applied"
    assert Order.objects.get(pk=order.pk).ends_at == ends_before + dt.timedelta(days=3)


JUNK = {
    "a token the shop does not sell": lambda chain, foreign_token: foreign_token,
    "another asset the shop sells": lambda chain, foreign_token: chain.usdt,
}


@pytest.mark.parametrize("junk", JUNK)
def test_a_strangers_junk_token_after_a_full_payment_does_not_block_the_extension(
    chain, customer, scan_pass, foreign_token, junk
):
    # Given an active rental with a 3-day extension asked for in USDC
    placed, order = _an_active_rental(chain, customer, scan_pass)
    ends_before = order.ends_at
    first = extend(customer, placed, duration_days=3).json()
    address = first["payment"]["address"]

    # When the customer pays it in full, and a stranger sends 1 unit of another token before the next pass
    chain.wallet.pay_token(chain.usdc, address, int(first["payment"]["amount_base_units"]))
    token = JUNK[junk](chain, foreign_token)
    dust = chain.wallet.pay_token(token, address, 1)
    settle_rounds(chain, scan_pass)

    # Then the extension is applied and the days are given
    seen = customer.read(placed)["extensions"][0]
    assert (seen["status"], seen["payment"]["status"]) == ("applied", "confirmed")
    assert Order.objects.get(pk=order.pk).ends_at == ends_before + dt.timedelta(days=3)
    # And the junk is recorded apart, shown to reviewers, and due back in its own asset
    _junk_is_a_separate_refundable_item(first["id"], dust.tx_hash, token)


@pytest.mark.parametrize("junk", JUNK)
def test_a_strangers_junk_token_after_a_full_payment_does_not_block_the_order(
    chain, customer, scan_pass, foreign_token, junk
):
    # Given an order awaiting its USDC
    placed = customer.order()
    address = placed["payment"]["address"]

    # When it is paid in full, and a stranger sends 1 unit of another token before the next pass
    chain.wallet.pay_token(chain.usdc, address, units(placed))
    token = JUNK[junk](chain, foreign_token)
    dust = chain.wallet.pay_token(token, address, 1)
    settle_rounds(chain, scan_pass)

    # Then the order is paid
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(units(placed))
    _junk_is_a_separate_refundable_item(None, dust.tx_hash, token)


def _junk_is_a_separate_refundable_item(extension_id: int | None, tx_hash: str, token: str) -> None:
    credit = Credit.objects.get(tx_hash=tx_hash.lower())
    assert credit.payment.extension_id == extension_id
    assert (credit.kind, credit.token_contract, int(credit.amount_base_units)) == ("wrong_asset", token.lower(), 1)
    due = credit.payment.refunds_due
    assert [(entry["contract"], entry["base_units"]) for entry in due] == [(token.lower(), "1")]


def _block_time(chain, block_number: int) -> dt.datetime:
    block = rpc(chain.node.url, "eth_getBlockByNumber", [hex(block_number), False])
    return dt.datetime.fromtimestamp(int(block["timestamp"], 16), tz=dt.UTC)


def _rental_ends_just_after(order: Order, moment: dt.datetime) -> dt.datetime:
    """The rental's end moved to one second after `moment`, and that end passed."""
    ends_at = moment + dt.timedelta(seconds=1)
    Order.objects.filter(pk=order.pk).update(ends_at=ends_at)
    wait = (ends_at - timezone.now()).total_seconds()
    assert wait < 5, "the chain's clock runs ahead of this machine's"
    if wait > 0:
        time.sleep(wait + 0.05)
    return ends_at


def test_money_that_arrived_in_time_is_accepted_with_its_days_by_a_reviewer_after_the_rental_ended(
    chain, customer, scan_pass
):
    # Given an extension paid 1 unit short before the rental's end: it waits for a reviewer
    placed, order = _an_active_rental(chain, customer, scan_pass)
    first = extend(customer, placed, duration_days=3).json()
    short = int(first["payment"]["amount_base_units"]) - 1
    sent = chain.wallet.pay_token(chain.usdc, first["payment"]["address"], short)
    settle_rounds(chain, scan_pass)
    assert Extension.objects.get(pk=first["id"]).status == "needs_review"
    # And the rental's end passes before the reviewer comes
    ends_at = _rental_ends_just_after(order, _block_time(chain, sent.block_number))

    # When the reviewer accepts the payment
    payment = PaymentRequest.objects.get(extension_id=first["id"])
    payment_review_decide(payment_id=payment.pk, decision=Decision.ACCEPT, reason="1 unit short", reviewer="rita")

    # Then the days are given from the rental's end, and nothing is refunded as late
    assert Extension.objects.get(pk=first["id"]).status == "applied"
    assert Order.objects.get(pk=order.pk).ends_at == ends_at + dt.timedelta(days=3)
    assert not [r for r in customer.read(placed)["refunds"] if r["reason"] == "late"]


def test_money_that_arrived_in_time_and_became_final_after_the_end_gives_its_days(chain, customer, scan_pass):
    # Given an extension paid in full before the rental's end, not final yet when the end passes
    placed, order = _an_active_rental(chain, customer, scan_pass)
    first = extend(customer, placed, duration_days=3).json()
    sent = chain.wallet.pay_token(chain.usdc, first["payment"]["address"], int(first["payment"]["amount_base_units"]))
    ends_at = _rental_ends_just_after(order, _block_time(chain, sent.block_number))

    # When it becomes final
    settle_rounds(chain, scan_pass)

    # Then the extension is applied with its days, not sent to a reviewer
    assert Extension.objects.get(pk=first["id"]).status == "applied"
    assert Order.objects.get(pk=order.pk).ends_at == ends_at + dt.timedelta(days=3)
    assert payment_of(placed).status == "confirmed"


def _grant_until(order: Order, node, ends_at: dt.datetime) -> AccessGrant:
    return AccessGrant.objects.create(
        order=order, node=node, account="o-test", host="203.0.113.7", port=22, host_key_fingerprint="SHA256:x",
        ssh_key_fingerprint=order.ssh_key_fingerprint, ends_at=ends_at,
    )  # fmt: skip


def _extension_seen_before_the_end(chain, customer, scan_pass, make_node) -> tuple:
    """An active rental with live access and an extension paid in full, seen by the scan, not final yet, when
    the rental's end passes. Returns the order, the extension (API), the end and the grant."""
    placed, order = _an_active_rental(chain, customer, scan_pass)
    first = extend(customer, placed, duration_days=3).json()
    sent = chain.wallet.pay_token(chain.usdc, first["payment"]["address"], int(first["payment"]["amount_base_units"]))
    scan_pass()
    ends_at = _rental_ends_just_after(order, _block_time(chain, sent.block_number))
    return order, first, ends_at, _grant_until(order, make_node(), ends_at)


def test_an_extension_paid_in_full_before_the_end_holds_the_end_until_its_money_is_final(
    chain, customer, scan_pass, make_node
):
    # Given an extension paid in full before the rental's end, seen by the scan but not final when the end passes
    order, first, ends_at, grant = _extension_seen_before_the_end(chain, customer, scan_pass, make_node)
    assert Extension.objects.get(pk=first["id"]).status != "applied"

    # Then the end-of-rental pass does not take the access back while the money becomes final
    assert not grants_due(timezone.now()).filter(pk=grant.pk).exists()

    # And once it is final the extension buys its days from the old end, for the access too
    settle_rounds(chain, scan_pass)
    assert Extension.objects.get(pk=first["id"]).status == "applied"
    assert AccessGrant.objects.get(pk=grant.pk).ends_at == ends_at + dt.timedelta(days=3)


def test_the_end_waits_for_money_seen_in_time_no_longer_than_the_grace(chain, customer, scan_pass, make_node, settings):
    # Given an extension paid in full before the end, whose money never becomes final
    settings.EXTENSION_FINALITY_GRACE_MINUTES = 60
    settings.DATA_GRACE_HOURS = 0  # the end itself, no time to take data home (tests/.../test_data_grace.py)
    order, first, ends_at, grant = _extension_seen_before_the_end(chain, customer, scan_pass, make_node)

    # Then past the grace the access is taken back as at any end; and money short of the price holds nothing
    assert grants_due(ends_at + dt.timedelta(minutes=61)).filter(pk=grant.pk).exists()
    Credit.objects.filter(payment__extension_id=first["id"]).update(amount_base_units=1)
    assert grants_due(timezone.now()).filter(pk=grant.pk).exists()


def test_access_reads_the_credit_kind_payments_writes_for_money_in_the_asset_asked_for():
    # provisioning imports no payments module, so it names the kind by its value: the two must stay equal
    assert CREDIT_MATCH == CreditKind.MATCH
