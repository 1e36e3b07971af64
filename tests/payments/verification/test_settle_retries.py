"""A database error never loses a payment's settlement or a notice's check: retried with backoff, and a
periodic pass re-settles any payment whose credits disagree with its status.

The fault: once a pass had marked a credit final, an error in the settlement that follows was never tried
again (later passes only settle payments whose credits change), so the payment stayed pending with its money
final on the chain, and the order could expire though paid. Injected here as an OperationalError, the error a
restarting or failing-over PostgreSQL raises.
"""

from __future__ import annotations

import pytest
from django.db import OperationalError

import payments.scan
import payments.verify
from config.celery import app
from payments.models import Credit
from payments.tasks import scan_all_networks_task
from tests.payments.verification.helpers import units


@pytest.fixture(autouse=True)
def retries_run_in_process():
    """Tasks run in-process (eager); a task that asks to be retried is run again at once, as a worker would
    after its countdown, instead of the Retry surfacing as an error."""
    previous = app.conf.task_eager_propagates
    app.conf.task_eager_propagates = False
    yield
    app.conf.task_eager_propagates = previous


def fail_once(monkeypatch, module, name: str) -> list:
    """`module.name` raises OperationalError on its first call, then works: a database that blinked."""
    real, calls = getattr(module, name), []

    def flaky(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return calls


def test_a_settlement_that_failed_after_the_credit_became_final_is_done_by_the_next_periodic_pass(
    chain, customer, monkeypatch, django_capture_on_commit_callbacks
):
    # Given a USDC order paid in full, with confirmations enough to be final at the first pass
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(3)

    # When beat's periodic pass runs and the settlement hits a database error once
    calls = fail_once(monkeypatch, payments.scan, "payment_settle")
    with django_capture_on_commit_callbacks(execute=True):
        scan_all_networks_task.delay()

    # Then the credit is final and the order is paid all the same, settled again without any new transfer
    assert calls, "the settlement's database error was not injected"
    assert Credit.objects.get().final
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")


def test_a_final_credit_whose_settlement_was_lost_is_settled_by_the_next_pass(chain, customer, scan_pass, monkeypatch):
    # Given a pass that marked the credit final but whose settlement failed (the command exited with the error)
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(3)
    fail_once(monkeypatch, payments.scan, "payment_settle")
    with pytest.raises(OperationalError):
        scan_pass()
    assert Credit.objects.get().final
    assert customer.read(placed)["payment"]["status"] == "pending"

    # When the next pass runs, with nothing new on the chain
    output = scan_pass()

    # Then the payment is settled from its final credit, and the order is paid
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert "settled again: confirmed" in output


def test_a_notice_check_that_hit_a_database_error_is_retried(chain, customer, monkeypatch):
    # Given an order paid in full, final
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(3)

    # When the customer presses "I have paid" and the check of the hash hits a database error once
    calls = fail_once(monkeypatch, payments.verify, "credit_record")
    customer.paid(placed, sent.tx_hash)

    # Then the check runs again and the order is paid
    assert len(calls) >= 2
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
