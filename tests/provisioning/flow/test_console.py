"""The operator console's own words: a run that has not started says "queued" (no dangling comma), "Restart what
is stuck" is offered only for a preparation with something stuck, and the console has a way out (log out)."""

from __future__ import annotations

import datetime as dt
import re

from django.utils import timezone

from provisioning.models import PreparationRun
from provisioning.prepare import preparation_start
from tests.staff import STAFF_PASSWORD


def running_section(client) -> str:
    html = client.get("/ops/").content.decode()
    return " ".join(html.split('id="running-title"', 1)[1].split("</section>", 1)[0].split())


def test_restart_what_is_stuck_is_offered_only_once_a_run_is_stuck(paid_order, local_node, operator, client):
    # Given an order whose preparation was just started: its run is queued, waiting for a worker
    local_node()
    order = paid_order(preparation="bare-node")
    preparation_start(order_id=order.pk, actor="olga")  # the job runs after the commit: never, in this test
    client.login(username="olga", password=STAFF_PASSWORD)

    # Then the console says it is queued, without a dangling comma, and offers no restart
    section = running_section(client)
    assert re.search(r"</a>: queued\s*<progress", section), section
    assert "queued, " not in section
    assert "Restart what is stuck" not in section

    # When the run has waited past PREPARATION_STUCK_AFTER_SECONDS without a worker taking it
    PreparationRun.objects.filter(order=order).update(created_at=timezone.now() - dt.timedelta(minutes=10))

    # Then the console offers to restart it
    assert "Restart what is stuck" in running_section(client)


def test_the_console_has_a_log_out_button(operator, client):
    client.login(username="olga", password=STAFF_PASSWORD)

    html = client.get("/ops/").content.decode()

    assert re.search(r'<form method="post" action="/admin/logout/"[^>]*>.*?Log out</button>', html, re.S)
    assert "Signed in as olga" in html
