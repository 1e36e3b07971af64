"""Staff hear of what waits on them, at the real step, once: an order paid on-chain (operators), a payment short
of its amount (reviewers), money leaving a deposit address unexplained (operators, treasurers and
STAFF_ALERT_EMAILS); and a chat webhook that fails never holds the step up, and is retried by the job outbox."""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.core.management import call_command
from django.utils import timezone

from core.jobs.kinds import JobKind
from core.jobs.models import Job
from core.jobs.outbox import jobs_send_due
from orders.models import OrderStatus
from tests.payments.verification.deposit_keys import STRANGER, deposit_wallet, known_keys  # noqa: F401 - autouse fixture
from tests.payments.verification.helpers import order_of, pay, payment_of, units

OPS, REVIEW, TREASURY_DESK = "ops@example.org", "review@example.org", "treasury@example.org"
WEBHOOK_TASK = JobKind.STAFF_WEBHOOK


@pytest.fixture(autouse=True)
def staff_with_email(db):
    staff = (("olga", "operator", OPS), ("rita", "reviewer", REVIEW), ("tom", "treasurer", TREASURY_DESK))
    for name, role, email in staff:
        call_command("add_staff", name, "--role", role, "--email", email)


def staff_mail(address: str) -> list:
    return [message for message in mail.outbox if address in message.to]


class ChatHook:
    """A chat channel's incoming webhook on loopback: answers `status` (500 while it is "down"), keeps the bodies."""

    def __init__(self) -> None:
        self.status = 200
        self.received: list[dict] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append({"status": hook.status, "body": json.loads(body)})
                self.send_response(hook.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T0/B0/secret-part"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> list[str]:
        return [item["body"]["text"] for item in self.received if item["status"] == 200]


@pytest.fixture
def chat_hook(settings):
    hook = ChatHook()
    settings.STAFF_WEBHOOK_URL = hook.url
    yield hook
    hook.server.shutdown()


def test_an_order_paid_on_chain_tells_the_operators_once_with_no_customer_link(chain, customer, scan_pass):
    # Given an order paid in full, seen by the scan
    placed = pay(chain, customer, scan_pass)
    assert order_of(placed).status == OrderStatus.PAID

    # When the scan runs again (and again)
    scan_pass()
    scan_pass()

    # Then the operators were told once, with the reference and a link to the console; reviewers were not
    (told,) = staff_mail(OPS)
    assert told.subject.endswith(f"Order {placed['reference']} is paid and waits for its preparation")
    assert "/ops/" in told.body and placed["access_token"] not in told.body and "/o/" not in told.body
    assert not staff_mail(REVIEW)


def test_a_short_payment_tells_the_reviewers_once(chain, customer, scan_pass):
    # Given an order paid one base unit short
    placed = pay(chain, customer, scan_pass, short_by=1)
    scan_pass()

    # Then reviewers were told once, with a link to the order in the admin; operators have nothing to do yet
    assert order_of(placed).status == OrderStatus.NEEDS_REVIEW
    (told,) = staff_mail(REVIEW)
    assert told.subject.endswith(f"Order {placed['reference']}: its payment needs a review")
    assert f"/admin/orders/order/{order_of(placed).pk}/change/" in told.body
    assert placed["access_token"] not in told.body
    assert not staff_mail(OPS)


def test_money_taken_from_a_deposit_address_tells_operators_treasurers_and_the_alert_list_once(
    chain, customer, scan_pass
):
    # Given a paid order, and someone who holds its deposit key
    placed = pay(chain, customer, scan_pass)
    mail.outbox.clear()
    thief = deposit_wallet(chain, placed)

    # When they take the money and the scan runs twice
    sent = thief.transfer(chain.usdc, STRANGER, units(placed))
    scan_pass()
    scan_pass()

    # Then one email reached operators, treasurers and the alert list, naming the transaction
    alerts = [m for m in mail.outbox if "unexpected outflow" in m.subject]
    assert len(alerts) == 1
    assert {OPS, TREASURY_DESK, "security@example.org"} <= set(alerts[0].to)
    assert sent.tx_hash.lower() in alerts[0].body and payment_of(placed).address in alerts[0].subject


def test_a_chat_webhook_that_fails_holds_nothing_up_and_is_sent_once_it_answers(chain, customer, scan_pass, chat_hook):
    # Given a chat hook that is down
    chat_hook.status = 500

    # When an order is paid
    placed = pay(chain, customer, scan_pass)

    # Then the step went through and the operators' email went out; the hook's job waits, its error recorded
    # without the hook's URL (its secret)
    assert order_of(placed).status == OrderStatus.PAID
    assert len(staff_mail(OPS)) == 1
    job = Job.objects.get(kind=WEBHOOK_TASK)
    assert job.done_at is None and "HTTP 500" in job.last_error and "secret-part" not in job.last_error
    assert chat_hook.received and not chat_hook.delivered()

    # When the hook is back and beat's sweep finds the job due
    chat_hook.status = 200
    scan_pass()  # nothing new to tell
    jobs_send_due(now=timezone.now() + dt.timedelta(hours=2))
    jobs_send_due(now=timezone.now() + dt.timedelta(hours=4))

    # Then the message was delivered once, JSON {"text": ...}, naming the order and linking the console
    (text,) = chat_hook.delivered()
    assert f"Order {placed['reference']} is paid" in text and "/ops/" in text
    assert placed["access_token"] not in text
    job.refresh_from_db()
    assert job.done_at is not None
