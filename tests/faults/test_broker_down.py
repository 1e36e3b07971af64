"""The broker (Redis) is down when a customer presses "I have paid": the notice is stored and acknowledged at
once, and the payment is verified once the broker is back, by the re-sent check and by the periodic scan.

A private redis-server is stopped and started again (never the shared one); the shop runs in gunicorn, the
background work in a real worker and a real beat, all on the test database.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from urllib.parse import urljoin

import pytest
import redis
import requests

from orders.models import Order, OutgoingEmail
from payments.models import Credit, Notice
from tests.faults.servers import CeleryBeat, Gunicorn
from tests.payments.verification.helpers import ORDERS_URL, units
from tests.placing import order_posted_to
from tests.servers import ROOT, CeleryWorker, clean_environment, database_url_for_tests, deployed_secrets

worker_test = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# The periodic scan every second, and a job (a notice's check, an email) re-sent as soon as it is found not run.
FAST_BEAT = {"SCAN_INTERVAL_SECONDS": "1", "JOB_RESEND_AFTER_SECONDS": "0"}


@pytest.fixture
def shop_on_private_broker(transactional_db, private_redis, chain, tmp_path):
    """gunicorn on the test database, enqueueing to the private broker; the `local` chain is this test's."""
    server = Gunicorn(tmp_path, **shop_env(private_redis, chain))
    try:
        yield server
    finally:
        server.stop()


def shop_env(broker, chain) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url_for_tests(),
        "CELERY_BROKER_URL": broker.url,
        "CHAIN_RPC_URLS_LOCAL": chain.node.url,
        "DJANGO_DEBUG": "0",
        **deployed_secrets(),  # refused otherwise with DEBUG off
        "RATELIMIT_ENABLE": "0",
        **FAST_BEAT,
    }


def place_paid_order(shop: Gunicorn, chain, make_node, order_payload) -> tuple[dict, str]:
    """A USDC order placed over HTTP and paid in full from the customer's wallet (2 confirmations)."""
    make_node()
    placed = order_posted_to(shop.url, {**order_payload, "asset": "USDC"})
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    return placed, sent.tx_hash


def press_paid_in_the_api(shop: Gunicorn, placed: dict, tx_hash: str) -> tuple[requests.Response, float]:
    started = time.monotonic()
    response = requests.post(
        f"{shop.url}{ORDERS_URL}{placed['reference']}/paid/",
        json={"tx_hash": tx_hash},
        headers={"X-Order-Token": placed["access_token"]},
        timeout=30,
    )
    return response, time.monotonic() - started


def as_if_behind_a_tls_proxy(browser: requests.Session) -> None:
    """DEBUG off makes the cookies `Secure`: a browser sends them back over HTTPS to the TLS proxy, which speaks
    plain HTTP to gunicorn as this test does; so the test's browser drops the flag of the cookies it holds."""
    for cookie in browser.cookies:
        cookie.secure = False


def press_paid_on_the_page(shop: Gunicorn, placed: dict, tx_hash: str) -> tuple[requests.Response, float]:
    """The browser's way: open the order's page, submit its "I have paid" form (with its CSRF token)."""
    browser = requests.Session()
    page = browser.get(placed["status_url"], timeout=15)
    assert page.status_code == 200, page.text[:500]
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    started = time.monotonic()
    as_if_behind_a_tls_proxy(browser)
    posted = browser.post(
        placed["status_url"].rstrip("/") + "/paid/",
        data={"csrfmiddlewaretoken": csrf, "tx_hash": tx_hash},
        headers={"Referer": placed["status_url"]},
        timeout=30,
        allow_redirects=False,
    )
    assert posted.status_code == 302, (posted.status_code, posted.text[:500])
    as_if_behind_a_tls_proxy(browser)  # the message ("Thank you...") travels in a cookie to the next page
    answer = browser.get(urljoin(posted.url, posted.headers["Location"]), timeout=30)
    return answer, time.monotonic() - started


def broker_down_notices(shop, private_redis, chain, make_node, order_payload) -> list[tuple[dict, str, float]]:
    """Two paid orders; the broker stops; one customer presses "I have paid" in the API, one on the page."""
    api_order, api_tx = place_paid_order(shop, chain, make_node, order_payload)
    page_order, page_tx = place_paid_order(shop, chain, make_node, order_payload)
    private_redis.stop()

    api, api_seconds = press_paid_in_the_api(shop, api_order, api_tx)
    page, page_seconds = press_paid_on_the_page(shop, page_order, page_tx)

    assert api.status_code == 202, api.text
    assert api.json()["detail"] == "Received: the payment is being checked on-chain."
    assert api.json()["status"] == "payment_reported"
    assert page.status_code == 200 and page.url == page_order["status_url"], (page.status_code, page.url)
    assert "Thank you: we are checking the chain now." in page.text
    for placed, tx_hash in ((api_order, api_tx), (page_order, page_tx)):
        notice = Notice.objects.get(payment__order__reference=placed["reference"])
        assert (notice.tx_hash, notice.checked_at) == (tx_hash.lower(), None)
        assert Order.objects.get(reference=placed["reference"]).status == "payment_reported"
    return [(api_order, api_tx, api_seconds), (page_order, page_tx, page_seconds)]


def paid(placed: dict) -> bool:
    return Order.objects.get(reference=placed["reference"]).status == "paid"


@worker_test
def test_i_have_paid_while_the_broker_is_down_is_received_and_the_beat_verifies_it_once_the_broker_is_back(
    private_redis, chain, shop_on_private_broker, make_node, order_payload, tmp_path
):
    shop = shop_on_private_broker
    env = {"CHAIN_RPC_URLS_LOCAL": chain.node.url, **deployed_secrets(), **FAST_BEAT}
    worker = CeleryWorker(broker_url=private_redis.url, queue="celery", folder=tmp_path, **env)
    beat = None
    try:
        worker.wait_ready()
        # Given two paid orders, and the broker stopped; when their customers press "I have paid" (API, page)
        # Then both are told at once that the notice was received, and the notices are stored
        reported = broker_down_notices(shop, private_redis, chain, make_node, order_payload)
        worker.wait_for(lambda: "Connection to broker lost" in worker.output(), "the worker did not see it go", 15)
        # (and another customer orders meanwhile: the order is placed, its "order received" email stored)
        make_node()
        another = order_posted_to(shop.url, {**order_payload, "asset": "USDC"}, timeout=30)
        assert OutgoingEmail.objects.get(order__reference=another["reference"]).sent_at is None

        # When the broker comes back, with the scheduler that sends the periodic scan
        private_redis.start()
        beat = CeleryBeat(tmp_path, CELERY_BROKER_URL=private_redis.url, DATABASE_URL=database_url_for_tests(), **env)

        # Then both payments are verified and both orders paid, each transfer credited once
        for placed, tx_hash, _ in reported:
            worker.wait_for(lambda placed=placed: paid(placed), f"{placed['reference']} was not paid", 40)
            # the stored notice was checked too: the beat sent its lost check again
            worker.wait_for(
                lambda placed=placed: Notice.objects.filter(
                    payment__order__reference=placed["reference"], checked_at__isnull=False
                ).exists(),
                "the notice was never checked",
            )
            assert Credit.objects.filter(tx_hash=tx_hash.lower()).count() == 1
        # And each customer gets one "payment confirmed" email
        worker.wait_for(
            lambda: sum("payment confirmed" in subject for subject in worker.email_subjects()) == 2,
            "two 'payment confirmed' emails",
        )
        # And the customer who ordered during the outage gets the "order received" email, once
        received = f"Order {another['reference']} received"
        worker.wait_for(
            lambda: sum(received in subject for subject in worker.email_subjects()) == 1,
            "the 'order received' email of the order placed during the outage",
        )
        assert "scan_all_networks_task" in beat.output()
        print(
            "\n'I have paid' with the broker down answered in "
            + ", ".join(f"{seconds:.3f} s" for _, _, seconds in reported)
            + " (API 202, page redirect with its message)"
        )
    finally:
        worker.stop()
        if beat is not None:
            beat.stop()


@worker_test
def test_the_scan_payments_command_pays_an_order_reported_while_the_broker_was_down(
    private_redis, chain, shop_on_private_broker, make_node, order_payload
):
    shop = shop_on_private_broker
    # Given an order paid in full whose "I have paid" was pressed while the broker was down
    placed, tx_hash = place_paid_order(shop, chain, make_node, order_payload)
    private_redis.stop()
    answer, seconds = press_paid_in_the_api(shop, placed, tx_hash)
    assert answer.status_code == 202, answer.text
    # (and another customer can still order meanwhile; their "order received" email waits in the outbox)
    make_node()
    started = time.monotonic()
    another = order_posted_to(shop.url, {**order_payload, "asset": "USDC"}, timeout=30)
    order_seconds = time.monotonic() - started

    # When the broker is back and an operator (or cron) runs one verification pass
    private_redis.start()
    done = subprocess.run(
        [sys.executable, "manage.py", "scan_payments"],
        cwd=ROOT,
        env=clean_environment(DJANGO_SETTINGS_MODULE="config.settings.base", **shop_env(private_redis, chain)),
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Then the order is paid, the transfer credited once, and the "payment confirmed" email is stored, its send
    # queued; the "order received" email of the order placed during the outage is stored too, for beat to send
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 settled" in done.stdout, done.stdout
    assert paid(placed)
    assert Credit.objects.filter(tx_hash=tx_hash.lower()).count() == 1
    confirmed = OutgoingEmail.objects.get(order__reference=placed["reference"], name="payment_confirmed")
    queued = redis.Redis.from_url(private_redis.url).lrange("celery", 0, -1)
    assert confirmed.sent_at is None
    assert any(b"orders.email_send" in message for message in queued), queued
    assert OutgoingEmail.objects.filter(order__reference=another["reference"], sent_at=None).count() == 1
    print(
        f"\nwith the broker down: 'I have paid' answered in {seconds:.3f} s, an order placed in {order_seconds:.3f} s"
    )


@worker_test
def test_i_have_paid_with_a_broker_that_no_longer_answers_is_received_within_seconds(
    private_redis, chain, shop_on_private_broker, make_node, order_payload
):
    shop = shop_on_private_broker
    # Given a paid order (placing it opened the web process's connection to the broker)
    placed, tx_hash = place_paid_order(shop, chain, make_node, order_payload)

    # When the broker hangs (its host accepts connections but nothing answers) and the customer presses
    # "I have paid"
    private_redis.freeze()
    answer, seconds = press_paid_in_the_api(shop, placed, tx_hash)

    # Then the customer is told within seconds that the notice was received, and the notice is stored
    # (the broker's socket timeout, 2 s, bounds each try of the publish; without it the request hung for good)
    assert answer.status_code == 202, answer.text
    assert seconds < 12
    assert Notice.objects.filter(payment__order__reference=placed["reference"], checked_at=None).count() == 1
    print(f"\n'I have paid' with a hung broker answered in {seconds:.3f} s")
