"""A payment's status table: every allowed move is saved with one event row, every other move is refused and
changes nothing, a non-change is a no-op; reviewers use a part of the table; one table tells the order what a
payment outcome means."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from django.utils import timezone

from core.transition_event import TransitionNotAllowed
from orders.models import OrderStatus
from orders.orders import ORDER_TRANSITIONS
from orders.payment_outcome import ORDER_PAYMENT_OUTCOMES, OrderPaymentOutcome
from payments.lifecycle import PAYMENT_TRANSITIONS, REVIEWER_TRANSITIONS, payment_note, payment_transition
from payments.models import Asset, Credit, CreditKind, PaymentEvent, PaymentRequest, PaymentStatus
from payments.review import Decision, ReviewError, payment_review_decide
from payments.settle import OUTCOME
from tests.stored_rows import order_stored

pytestmark = pytest.mark.django_db

STATUSES = list(PaymentStatus.values)
ALLOWED = [(start, to) for start, targets in PAYMENT_TRANSITIONS.items() for to in sorted(targets)]
REFUSED = [(start, to) for start, to in itertools.permutations(STATUSES, 2) if to not in PAYMENT_TRANSITIONS[start]]
OUTCOMES = [value for name, value in vars(OrderPaymentOutcome).items() if name.isupper()]


def payment_in(status: str) -> PaymentRequest:
    """An order for one lot and its payment request, stored directly in `status` (no chain, no quote)."""
    now = timezone.now()
    asset = Asset.objects.select_related("network").get(network__slug="local", symbol="ETH")
    order = order_stored()
    return PaymentRequest.objects.create(
        order=order,
        asset=asset,
        chain_id=asset.network.chain_id,
        decimals=asset.decimals,
        key_fingerprint="test",
        derivation_index=0,
        address="0x" + "11" * 20,
        amount_usd=order.total_usd,
        usd_rate=1,
        amount_base_units=10**18,
        expires_at=now + dt.timedelta(hours=1),
        start_block=0,
        status=status,
    )


def stored(payment: PaymentRequest) -> tuple[str, int]:
    """The payment's status and its number of event rows, as the database has them."""
    return PaymentRequest.objects.get(pk=payment.pk).status, PaymentEvent.objects.filter(payment=payment).count()


def credit_for(payment: PaymentRequest) -> Credit:
    """A final matching transfer of the full amount, as the verifier would have stored it."""
    return Credit.objects.create(
        payment=payment,
        network=payment.asset.network,
        asset=payment.asset,
        chain_id=payment.chain_id,
        tx_hash="0x" + "ab" * 32,
        log_index=-1,
        block_number=1,
        block_hash="0x" + "cd" * 32,
        block_timestamp=timezone.now(),
        sender="0x" + "22" * 20,
        amount_base_units=payment.amount_base_units,
        kind=CreditKind.MATCH,
        final=True,
    )


def test_the_table_knows_every_status_and_rejected_is_final():
    # Given the table / Then every status has a row, every target is a status, and rejected leads nowhere
    assert set(PAYMENT_TRANSITIONS) == set(STATUSES)
    assert all(targets <= set(STATUSES) for targets in PAYMENT_TRANSITIONS.values())
    assert all(start not in targets for start, targets in PAYMENT_TRANSITIONS.items())
    assert PAYMENT_TRANSITIONS[PaymentStatus.REJECTED] == frozenset()


@pytest.mark.parametrize(("start", "to"), ALLOWED)
def test_every_allowed_move_is_saved_and_writes_exactly_one_event(start, to):
    # Given a payment in status `start`
    payment = payment_in(start)
    now = timezone.now()

    # When it moves to `to`
    moved = payment_transition(payment=payment, to=to, actor="system", reason="a test move", now=now)

    # Then the status is stored, and one event says from, to, who, when and why
    assert moved is True
    assert stored(payment) == (to, 1)
    event = PaymentEvent.objects.get(payment=payment)
    assert (event.from_status, event.to_status, event.actor, event.reason, event.created_at) == (
        start,
        to,
        "system",
        "a test move",
        now,
    )


@pytest.mark.parametrize(("start", "to"), REFUSED)
def test_every_move_outside_the_table_is_refused_by_name_and_changes_nothing(start, to):
    # Given a payment in status `start`
    payment = payment_in(start)

    # When a move to `to` is attempted / Then it is refused with an error naming both statuses
    with pytest.raises(TransitionNotAllowed, match=f"{start} -> {to} is not allowed"):
        payment_transition(payment=payment, to=to, actor="system", reason="a test move", now=timezone.now())

    # And the payment and its history are as they were
    assert payment.status == start
    assert stored(payment) == (start, 0)


@pytest.mark.parametrize("status", STATUSES)
def test_a_non_change_is_a_no_op_and_writes_no_event(status):
    # Given a payment in `status`
    payment = payment_in(status)

    # When it is "moved" to the status it has / Then nothing happens and no event row is written
    assert payment_transition(payment=payment, to=status, actor="system", reason="again", now=timezone.now()) is False
    assert stored(payment) == (status, 0)


def test_the_status_writer_saves_the_status_alone():
    # Given a payment whose figures were changed in memory but not saved
    payment = payment_in(PaymentStatus.PENDING)
    payment.received_base_units, payment.confirmations = 5, 3

    # When its status moves
    payment_transition(payment=payment, to=PaymentStatus.DETECTED, actor="system", reason="seen", now=timezone.now())

    # Then only the status reached the database: the figures are saved by whoever computed them
    row = PaymentRequest.objects.get(pk=payment.pk)
    assert (row.status, int(row.received_base_units), row.confirmations) == (PaymentStatus.DETECTED, 0, 0)


def test_a_note_keeps_a_decision_that_changes_no_status():
    # Given a payment under review
    payment = payment_in(PaymentStatus.OVERPAID)

    # When a note is written (a refund decision, a deep reorg that leaves the status where it was)
    payment_note(payment=payment, actor="reviewer rita", reason="excess to refund", now=timezone.now())

    # Then the status is unchanged and the note is in its history, from and to the same status
    event = PaymentEvent.objects.get(payment=payment)
    assert (event.from_status, event.to_status, event.reason) == ("overpaid", "overpaid", "excess to refund")
    assert stored(payment) == (PaymentStatus.OVERPAID, 1)


def test_a_reviewer_uses_only_a_part_of_the_table():
    # Given both tables / Then every reviewer move is in the payment's table, and reviewers only accept or reject
    assert set(REVIEWER_TRANSITIONS) == set(STATUSES)
    for start, targets in REVIEWER_TRANSITIONS.items():
        assert targets <= PAYMENT_TRANSITIONS[start]
        assert targets <= {PaymentStatus.CONFIRMED, PaymentStatus.REJECTED}


@pytest.mark.parametrize("status", STATUSES)
def test_a_reviewer_rejects_a_payment_only_where_the_reviewer_table_allows_it(status):
    # Given a payment in `status` with a transfer on its address
    payment = payment_in(status)
    credit_for(payment)
    allowed = PaymentStatus.REJECTED in REVIEWER_TRANSITIONS[status]

    # When a reviewer rejects it
    if not allowed:
        with pytest.raises(ReviewError, match=f"The payment is already {status}."):
            payment_review_decide(payment_id=payment.pk, decision=Decision.REJECT, reason="r", reviewer="rita")
    else:
        payment_review_decide(payment_id=payment.pk, decision=Decision.REJECT, reason="r", reviewer="rita")

    # Then it is rejected with one event row, or refused and left as it was
    assert stored(payment) == ((PaymentStatus.REJECTED, 1) if allowed else (status, 0))


@pytest.mark.parametrize("status", STATUSES)
def test_a_reviewer_accepts_a_payment_only_where_the_reviewer_table_allows_it(make_node, status):
    # Given a payment in `status` with a transfer on its address, and a free node for its lot
    make_node()
    payment = payment_in(status)
    credit_for(payment)
    allowed = PaymentStatus.CONFIRMED in REVIEWER_TRANSITIONS[status]

    # When a reviewer accepts it
    if not allowed:
        with pytest.raises(ReviewError, match=f"The payment is already {status}."):
            payment_review_decide(payment_id=payment.pk, decision=Decision.ACCEPT, reason="r", reviewer="rita")
    else:
        payment_review_decide(payment_id=payment.pk, decision=Decision.ACCEPT, reason="r", reviewer="rita")

    # Then it is confirmed with one event row and marked reviewed, or refused and left as it was
    row = PaymentRequest.objects.get(pk=payment.pk)
    assert stored(payment) == ((PaymentStatus.CONFIRMED, 1) if allowed else (status, 0))
    assert (row.reviewed_by == "rita") is allowed


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_every_payment_outcome_has_one_order_target_reachable_in_the_order_table(outcome):
    # Given the one outcome table / Then each outcome has one rule, whose target is an order status (or none:
    # the status stays), and every move it makes is one the order's own table allows
    rule = ORDER_PAYMENT_OUTCOMES[outcome]
    assert rule.target is None or rule.target in OrderStatus.values
    assert all(rule.target in ORDER_TRANSITIONS[start] for start in rule.moves_from)
    assert not rule.moves_from & rule.stays_in
    assert all(other in ORDER_PAYMENT_OUTCOMES and other != outcome for other, _why in rule.instead.values())


def test_the_outcome_table_covers_every_outcome_and_every_status_the_credits_can_call_for():
    # Given both ends of the mapping / Then every outcome has a rule, and each payment status the verifier
    # reaches (all but rejected, a reviewer's) names one outcome
    assert set(ORDER_PAYMENT_OUTCOMES) == set(OUTCOMES)
    assert set(OUTCOME) == set(STATUSES) - {PaymentStatus.REJECTED}
    assert set(OUTCOME.values()) <= set(OUTCOMES)
    assert [o for o, rule in ORDER_PAYMENT_OUTCOMES.items() if rule.target is None] == [OrderPaymentOutcome.HOLD]
