"""The retention pass (shop/retention.py) on a seeded history: each rule removes exactly the rows past their time,
in batches, and nothing else: open work, each node's latest check and every row of money evidence stay."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from orders.models import Extension, Order, OrderEvent, OutgoingEmail, RentalCredit
from provisioning.models import CheckKind, Manifest, Node, NodeCheck, NodeHealth, NodeMove, PreparationRun, RunStatus
from shop import retention
from shop.tasks import history_prune_task
from tests.stored_rows import order_stored

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def ago(days: float) -> dt.datetime:
    return NOW - dt.timedelta(days=days)


def job(*, done: float | None = None, gave_up: float | None = None, email: str = "") -> Job:
    args = {"email": email} if email else {}
    return Job.objects.create(
        kind=JobKind.ORDER_LOOKUP, args=args, created_at=ago(60), due_at=ago(60),
        done_at=ago(done) if done is not None else None, gave_up_at=ago(gave_up) if gave_up is not None else None,
    )  # fmt: skip


def check(node: Node, *, created: float, finished: float | None) -> NodeCheck:
    return NodeCheck.objects.create(
        node=node, kind=CheckKind.PROBE, requested_by="system", created_at=ago(created),
        finished_at=ago(finished) if finished is not None else None, passed=True if finished is not None else None,
    )  # fmt: skip


@pytest.fixture
def history(settings):
    """A history older and younger than each rule's time, with the rows no rule may touch beside it."""
    settings.JOB_KEEP_DAYS, settings.EMAIL_KEEP_DAYS, settings.NODE_HEALTH_KEEP_DAYS = 7, 30, 14
    settings.NODE_CHECK_KEEP_DAYS, settings.RUN_LOG_KEEP_DAYS = 90, 90
    order = order_stored()
    node, idle = (Node.objects.create(name=name, driver="local", host="127.0.0.1") for name in ("node-a", "node-b"))
    rows = {
        "jobs gone": [job(done=8), job(gave_up=8, email="ada@example.org"), job(done=30)],
        "jobs kept": [job(done=6), job(gave_up=6, email="bob@example.org"), job()],
        "emails gone": [
            OutgoingEmail.objects.create(order=order, name="paid", created_at=ago(40), sent_at=ago(31))
            for _ in range(3)
        ],
        "emails kept": [
            OutgoingEmail.objects.create(order=order, name="paid", created_at=ago(40), sent_at=ago(29)),
            OutgoingEmail.objects.create(order=order, name="paid", created_at=ago(40)),  # never sent: still due
        ],
        "probes gone": [
            NodeHealth.objects.create(node=node, order=order, checked_at=ago(15), reachable=True, healthy=True)
        ],
        "probes kept": [
            NodeHealth.objects.create(node=node, order=order, checked_at=ago(13), reachable=True, healthy=True)
        ],
        # node-b's only checks are old: the latest of them stays (the console shows it)
        "checks gone": [check(node, created=200, finished=200), check(idle, created=150, finished=150)],
        "checks kept": [
            check(node, created=1, finished=1),
            check(idle, created=100, finished=100),
            check(node, created=120, finished=None),  # still open: never pruned
        ],  # fmt: skip
    }
    old_run = PreparationRun.objects.create(
        order=order, node=node, status=RunStatus.FAILED, requested_by="olga", log="step 1\nstep 2\n",
        report={"passed": False}, error="the preflight failed", created_at=ago(100), finished_at=ago(91),
    )  # fmt: skip
    new_run = PreparationRun.objects.create(
        order=order, node=idle, status=RunStatus.PASSED, requested_by="olga", log="recent\n", finished_at=ago(89)
    )
    Manifest.objects.create(order=order, body={"order": order.reference}, signature="s", public_key="k")
    OrderEvent.objects.create(order=order, from_status="", to_status=order.status, actor="system", created_at=ago(900))
    return {**rows, "order": order, "old_run": old_run, "new_run": new_run}


def pks(rows) -> set[int]:
    return {row.pk for row in rows}


def test_each_rule_removes_exactly_the_rows_past_their_time(history):
    # When beat's hourly pass runs
    done = history_prune_task.apply().get()

    # Then what each rule says has had its time is gone, and nothing else
    assert pks(Job.objects.all()) == pks(history["jobs kept"])
    assert pks(OutgoingEmail.objects.all()) == pks(history["emails kept"])
    assert pks(NodeHealth.objects.all()) == pks(history["probes kept"])
    assert pks(NodeCheck.objects.all()) == pks(history["checks kept"])
    assert done == {
        "background jobs done or given up": 3,
        "emails sent": 3,
        "rented nodes' health probes": 1,
        "node checks and probes of idle nodes": 2,
        "preparation logs": 1,
        "orders expired unpaid": 0,  # order_stored's order is still awaiting its payment
        "orders past the accounting period, with their money evidence": 0,
    }
    # A "Find my order" job that gave up no longer holds the typed address (the privacy page's 7 days)
    assert not Job.objects.filter(args__email="ada@example.org").exists()

    # The old run keeps its outcome and its report (evidence), only its log goes
    old, new = (PreparationRun.objects.get(pk=history[name].pk) for name in ("old_run", "new_run"))
    assert (old.log, old.report, old.error, old.status) == ("", {"passed": False}, "the preflight failed", "failed")
    assert new.log == "recent\n"

    # And the money evidence is all there, whatever its age
    assert Order.objects.filter(pk=history["order"].pk).exists()
    assert Manifest.objects.filter(order=history["order"]).count() == 1
    assert OrderEvent.objects.filter(order=history["order"]).count() == 1


def test_a_pass_in_small_batches_removes_the_same_and_a_second_pass_nothing(history, monkeypatch):
    monkeypatch.setattr(retention, "PRUNE_BATCH", 1)

    first = retention.history_prune(now=NOW)
    second = retention.history_prune(now=NOW)

    assert sum(first.values()) == 10
    assert set(second.values()) == {0}
    assert pks(Job.objects.all()) == pks(history["jobs kept"])
    assert pks(NodeCheck.objects.all()) == pks(history["checks kept"])


def test_a_longer_setting_keeps_more(history, settings):
    settings.JOB_KEEP_DAYS, settings.EMAIL_KEEP_DAYS = 60, 60

    retention.history_prune(now=NOW)

    assert Job.objects.count() == 6
    assert OutgoingEmail.objects.count() == 5


def unpaid(reference: str, *, days_ago: float, status: str = "expired", index: int = 0) -> Order:
    """An order with its payment request, last changed `days_ago`."""
    from payments.models import Asset, PaymentRequest

    order = order_stored(reference=reference)
    asset = Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")
    PaymentRequest.objects.create(
        order=order, asset=asset, chain_id=asset.network.chain_id, decimals=18, key_fingerprint="test",
        derivation_index=index, address="0x" + f"{index:040x}", amount_usd=order.total_usd, usd_rate=1,
        amount_base_units=10**18, expires_at=ago(days_ago), start_block=0,
    )  # fmt: skip
    Order.objects.filter(pk=order.pk).update(status=status, updated_at=ago(days_ago))
    return order


def test_an_order_that_expired_unpaid_goes_whole_after_its_time_and_nothing_with_money_does(settings):
    from payments.models import Credit, PaymentRequest

    settings.UNPAID_ORDER_KEEP_DAYS = 90
    gone = unpaid("B2-OLD-0001", days_ago=91, index=1)
    recent = unpaid("B2-NEW-0001", days_ago=89, index=2)
    ended = unpaid("B2-END-0001", days_ago=400, status="ended", index=3)
    paid_late = unpaid("B2-LATE-0001", days_ago=400, index=4)  # a transfer reached it after the window
    payment = PaymentRequest.objects.get(order=paid_late)
    Credit.objects.create(
        payment=payment, network=payment.asset.network, asset=payment.asset, chain_id=payment.chain_id,
        tx_hash="0x" + "ab" * 32, log_index=0, block_number=5, block_hash="0x" + "cd" * 32,
        block_timestamp=ago(399), sender="0x" + "22" * 20, amount_base_units=1, kind="match", final=True,
    )  # fmt: skip
    # one an extension, a credit or a move protects (none should exist): skipped, never a pass stopped by it
    odd = unpaid("B2-ODD-0001", days_ago=400, index=5)
    RentalCredit.objects.create(order=odd, kind="staff", seconds=60, reason="a test", actor="olga")
    OrderEvent.objects.create(order=gone, to_status="expired", actor="system")
    OutgoingEmail.objects.create(order=gone, name="order_expired")

    done = retention.history_prune(now=timezone.now())

    assert done["orders expired unpaid"] == 1
    assert set(Order.objects.values_list("reference", flat=True)) == {
        recent.reference,
        ended.reference,
        paid_late.reference,
        odd.reference,
    }
    # its payment request, events and emails (and the customer's name and address in it) went with it
    assert not PaymentRequest.objects.filter(order_id=gone.pk).exists()
    assert not OrderEvent.objects.filter(order_id=gone.pk).exists()
    assert not OutgoingEmail.objects.filter(order_id=gone.pk).exists()
    assert PaymentRequest.objects.filter(order=paid_late).exists() and Credit.objects.count() == 1


def closed_books(reference: str, *, days_ago: float, index: int, node=None) -> Order:
    """An ended rental of `days_ago` with every kind of money evidence: paid, extended, credited time, moved,
    refunded in part, the rest swept, and an unexpected outflow staff looked into."""
    from payments.models import Credit, PaymentEvent, PaymentRequest, Refund, RefundEvent, Sweep, UnexpectedOutflow

    order = unpaid(reference, days_ago=days_ago, status="ended", index=index)
    payment = PaymentRequest.objects.select_related("asset__network").get(order=order)
    network, when = payment.asset.network, ago(days_ago)
    extension = Extension.objects.create(
        order=order, status="applied", duration_days=3, price_per_lot_usd=1, lots=1, total_usd=1, created_at=when
    )
    PaymentRequest.objects.create(
        order=order, extension=extension, asset=payment.asset, chain_id=payment.chain_id, decimals=18,
        key_fingerprint="test", derivation_index=index + 500, address="0x" + f"{index + 500:040x}", amount_usd=1,
        usd_rate=1, amount_base_units=1, expires_at=when, start_block=0,
    )  # fmt: skip
    chain = {"network": network, "chain_id": payment.chain_id, "token_contract": ""}
    Credit.objects.create(
        payment=payment, asset=payment.asset, tx_hash=f"0x{index:064x}", log_index=0, block_number=5,
        block_hash="0x" + "cd" * 32, block_timestamp=when, sender="0x" + "22" * 20, amount_base_units=10**18,
        kind="match", final=True, **chain,
    )  # fmt: skip
    PaymentEvent.objects.create(payment=payment, to_status="confirmed", actor="system")
    refund = Refund.objects.create(
        payment=payment, reason="cancelled", symbol="ETH", decimals=18, amount_base_units=10**17,
        to_address="0x" + "33" * 20, status="confirmed", tx_hash=f"0x{index + 1:064x}", block_number=6, sent_at=when,
        **chain,
    )  # fmt: skip
    RefundEvent.objects.create(refund=refund, from_status="sent", to_status="confirmed", actor="system")
    outflow = {"to_address": "0x" + "99" * 20, "log_index": -1, **chain}
    Sweep.objects.create(
        payment=payment, tx_hash=f"0x{index + 2:064x}", block_number=7, block_hash="0x" + "ef" * 32,
        amount_base_units=8 * 10**17, final=True, **outflow,
    )  # fmt: skip
    UnexpectedOutflow.objects.create(
        payment=payment, tx_hash=f"0x{index + 3:064x}", block_number=8, amount_base_units=10**17, **outflow
    )
    RentalCredit.objects.create(order=order, kind="staff", seconds=3600, reason="a slow node", actor="olga")
    if node is not None:
        NodeMove.objects.create(order=order, from_node=node, to_node=node, status="done", requested_by="olga")
        PreparationRun.objects.create(order=order, node=node, status="passed", requested_by="olga", finished_at=when)
    Manifest.objects.create(order=order, body={"order": reference}, signature="s", public_key="k")
    OrderEvent.objects.create(order=order, from_status="active", to_status="ended", actor="system", created_at=when)
    Order.objects.filter(pk=order.pk).update(updated_at=when)
    return order


def test_past_the_accounting_period_an_order_whose_books_are_closed_goes_whole_and_metrics_counters_stay(
    settings, client
):
    from payments.models import Credit, PaymentRequest, Refund, Sweep, UnexpectedOutflow
    from tests.metrics_scrape import scrape, value

    settings.MONEY_EVIDENCE_KEEP_DAYS = 3653
    node = Node.objects.create(name="node-a", driver="local", host="127.0.0.1")
    gone = closed_books("B2-GONE-0001", days_ago=3660, index=10, node=node)
    young = closed_books("B2-YOUNG-0001", days_ago=3640, index=20)  # inside the period
    # Past the period, but something on it may still move money: each stays
    money_left = closed_books("B2-LEFT-0001", days_ago=3700, index=30)
    PaymentRequest.objects.filter(order=money_left, extension=None).update(holds_money=True)
    refund_open = closed_books("B2-REFUND-0001", days_ago=3700, index=40)
    Refund.objects.filter(payment__order=refund_open).update(status="approved")
    sweep_unsure = closed_books("B2-SWEEP-0001", days_ago=3700, index=50)
    Sweep.objects.filter(payment__order=sweep_unsure).update(final=False)
    still_active = closed_books("B2-ACTIVE-0001", days_ago=3700, index=60)
    Order.objects.filter(pk=still_active.pk).update(status="active")
    before = scrape(client)

    done = retention.history_prune(now=timezone.now())

    assert done["orders past the accounting period, with their money evidence"] == 1
    assert set(Order.objects.values_list("reference", flat=True)) == {
        young.reference, money_left.reference, refund_open.reference, sweep_unsure.reference, still_active.reference
    }  # fmt: skip
    assert not PaymentRequest.objects.filter(order_id=gone.pk).exists()
    for model in (Credit, Refund, Sweep, UnexpectedOutflow):
        assert not model.objects.filter(payment__order_id=gone.pk).exists(), model
    for model in (Extension, RentalCredit, NodeMove, PreparationRun, Manifest, OrderEvent):
        assert not model.objects.filter(order_id=gone.pk).exists(), model
    assert Credit.objects.count() == Sweep.objects.count() == UnexpectedOutflow.objects.count() == 5
    # /metrics: one ended order fewer; the counters keep what they counted (a counter never goes down)
    after = scrape(client)
    assert value(after, "shop_orders", status="ended") == value(before, "shop_orders", status="ended") - 1 == 4
    for name, labels in (("payments_unexpected_outflows_total", {}), ("provisioning_preparations_total",
                                                                       {"result": "passed"})):  # fmt: skip
        assert value(after, name, **labels) == value(before, name, **labels) >= 1, name
