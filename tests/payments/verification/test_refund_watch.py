"""Refunds paid from addresses the scan had stopped reading (issue 25, item 2): a cancellation after the watch
window, a rejected payment, and the same approved refund in two plans before any scan recorded it. The server
plans, the treasurer's signer (a subprocess) pays on a real anvil, the scan records; balances read on-chain."""

from __future__ import annotations

import datetime as dt
import json

from django.core import mail
from django.utils import timezone

from payments.models import PaymentRequest, Refund, Sweep, UnexpectedOutflow
from payments.review import Decision, payment_review_decide
from payments.treasury import gas_account_address
from shop.cancellation import order_cancel_with_refunds
from tests.metrics_scrape import scrape, value
from tests.payments.signer.chain import run_signer
from tests.payments.verification.helpers import order_of, payment_of, units
from tests.payments.verification.money_out import (
    CUSTOMER_WALLET,
    EXCESS,
    TREASURY,
    balance,
    ledger_csv_rows,
    overpaid,
    refund_approved,
    staff,
)


def plan_of(client, treasurer: str) -> dict:
    answer = client.get("/api/v1/treasury/plan/?network=local", headers={"Authorization": f"Token {treasurer}"})
    assert answer.status_code == 200, answer.content
    return answer.json()


def planned_refunds(plan: dict) -> list:
    return [refund["id"] for item in plan["items"] for refund in item["refunds"]]


def sign(plan: dict, key, chain, directory, run: str):
    """The treasurer's run of one downloaded plan, its plan file and journal in a folder of their own."""
    folder = directory / run
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps(plan))
    out = str(folder / "run.json")
    done = run_signer(folder / "plan.json", key, chain.node.url, "--json", out, directory=directory, treasury=TREASURY)
    assert (folder / "run.json").exists(), done.stdout + done.stderr
    return done, json.loads((folder / "run.json").read_text())


def paid_past_its_watch(customer, chain, scan_pass) -> dict:
    """An order paid exactly in USDC, whose address's watch window is over (day 8 or later)."""
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    PaymentRequest.objects.filter(pk=payment_of(placed).pk).update(watch_until=timezone.now() - dt.timedelta(days=1))
    return placed


def paid_by_plan_and_recorded_once(client, chain, scan_pass, key, tmp_path, placed: dict, refund: Refund) -> None:
    """The refund is planned, the signer pays it, the scan records it as for any watched address (sent, then
    confirmed, the customer emailed, a ledger row), and the next plan no longer pays it."""
    treasurer = staff("treasurer", "tom")
    chain.wallet.pay_native(gas_account_address(), 10**18)
    first = plan_of(client, treasurer)
    assert planned_refunds(first) == [refund.pk]
    done, sent = sign(first, key, chain, tmp_path, "first")
    assert done.returncode == 0, done.stdout + done.stderr
    (paid,) = [entry for entry in sent if entry["kind"] == "refund"]
    assert balance(chain.node.url, chain.usdc, CUSTOMER_WALLET) == int(refund.amount_base_units)

    chain.mine(3)
    scan_pass()
    scan_pass()

    refund.refresh_from_db()
    assert (refund.status, refund.tx_hash) == ("confirmed", paid["tx_hash"].lower())
    confirmed = [m.subject for m in mail.outbox if "your refund is confirmed" in m.subject]
    assert confirmed == [f"Order {placed['reference']}: your refund is confirmed"]
    ledger = client.get("/api/v1/treasury/ledger.csv?kind=refund", headers={"Authorization": f"Token {treasurer}"})
    rows = ledger_csv_rows(ledger)
    assert [(row["tx_hash"], int(row["amount_base_units"])) for row in rows] == [
        (paid["tx_hash"].lower(), -int(refund.amount_base_units))
    ]
    assert planned_refunds(plan_of(client, treasurer)) == []
    assert balance(chain.node.url, chain.usdc, CUSTOMER_WALLET) == int(refund.amount_base_units)


def test_a_refund_of_a_cancellation_after_the_watch_window_is_recorded_confirmed_and_never_planned_again(
    treasurers_key, chain, customer, scan_pass, client, tmp_path
):
    # Given an order paid exactly, whose address the scan stopped reading (its watch window is over)
    placed = paid_past_its_watch(customer, chain, scan_pass)
    # And staff cancel the order then (day 8 or later): all of it goes back, approved by a reviewer
    order_cancel_with_refunds(order_id=order_of(placed).pk, actor="staff ada", reason="the customer asked")
    refund = refund_approved(client, placed, Refund.objects.get(payment=payment_of(placed)), staff("reviewer", "rita"))
    assert int(refund.amount_base_units) == units(placed)

    paid_by_plan_and_recorded_once(client, chain, scan_pass, treasurers_key, tmp_path, placed, refund)


def test_a_refund_of_a_rejected_payment_is_recorded_confirmed_and_never_planned_again(
    treasurers_key, chain, customer, scan_pass, client, tmp_path
):
    # Given an underpaid order whose payment a reviewer rejects: everything that arrived goes back
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) - 1)
    chain.mine(1)
    scan_pass()
    payment_review_decide(
        payment_id=payment_of(placed).pk, decision=Decision.REJECT, reason="the customer cancelled", reviewer="rita"
    )
    refund = refund_approved(client, placed, Refund.objects.get(payment=payment_of(placed)), staff("reviewer", "rita"))
    assert int(refund.amount_base_units) == units(placed) - 1

    paid_by_plan_and_recorded_once(client, chain, scan_pass, treasurers_key, tmp_path, placed, refund)


def test_a_refund_in_two_plans_before_any_scan_is_paid_once_by_two_signer_runs(
    treasurers_key, chain, customer, scan_pass, client, tmp_path, settings
):
    settings.METRICS_TOKEN = ""
    # Given an overpaid order's approved refund, and no treasury (nothing is swept: the address keeps its money)
    settings.TREASURY_ADDRESS = ""
    placed, refund = overpaid(chain, customer, scan_pass)
    refund_approved(client, placed, refund, staff("reviewer", "rita"))
    treasurer = staff("treasurer", "tom")
    chain.wallet.pay_native(gas_account_address(), 10**18)
    address = placed["payment"]["address"]

    # When the treasurer signs a plan, then downloads and signs another before any scan has seen the first
    first = plan_of(client, treasurer)
    done, _ = sign(first, treasurers_key, chain, tmp_path, "monday")
    assert done.returncode == 0, done.stdout + done.stderr
    second = plan_of(client, treasurer)
    assert planned_refunds(second) == [refund.pk]  # the server does not know yet
    # (staff see it: the refund's history shows both plans, /metrics counts it)
    assert refund.events.filter(reason="named in a treasury plan of local").count() == 2
    assert value(scrape(client), "payments_refunds_planned_again") == 1
    again, sent = sign(second, treasurers_key, chain, tmp_path, "tuesday")

    # Then the second run sends nothing: the customer got the excess once, the address keeps the quote
    url = chain.node.url
    assert balance(url, chain.usdc, CUSTOMER_WALLET) == EXCESS
    assert balance(url, chain.usdc, address) == units(placed)
    assert int(chain.node.call("eth_getTransactionCount", [address, "latest"]), 16) == 1
    assert again.returncode == 0, again.stdout + again.stderr
    assert "sent by an earlier plan" in again.stdout
    assert all(entry["resumed"] for entry in sent)
    # And once the scan records the refund, no plan names it again
    chain.mine(3)
    scan_pass()
    assert Refund.objects.get(pk=refund.pk).status in ("sent", "confirmed")
    assert planned_refunds(plan_of(client, treasurer)) == []
    assert value(scrape(client), "payments_refunds_planned_again") == 0


def test_a_sweep_of_an_address_past_its_watch_window_is_recorded_in_the_books(
    treasurers_key, chain, customer, scan_pass, client, tmp_path
):
    # Given a paid order whose watch window is over, its money still on the address
    placed = paid_past_its_watch(customer, chain, scan_pass)
    chain.wallet.pay_native(gas_account_address(), 10**18)

    # When the treasurer's plan sweeps it and the scan runs
    done, sent = sign(plan_of(client, staff("treasurer", "tom")), treasurers_key, chain, tmp_path, "sweep")
    assert done.returncode == 0, done.stdout + done.stderr
    chain.mine(3)
    scan_pass()

    # Then the books show the sweep (the address is empty for them too), and nothing unexpected
    (swept,) = [entry for entry in sent if entry["kind"] == "sweep"]
    recorded = list(Sweep.objects.values_list("tx_hash", "amount_base_units"))
    assert recorded == [(swept["tx_hash"].lower(), units(placed))]
    assert not UnexpectedOutflow.objects.exists()
    assert balance(chain.node.url, chain.usdc, TREASURY) == units(placed)
