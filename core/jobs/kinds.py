"""Every kind of background job, by a stable name: what a service passes to `job_enqueue`, and the name of the
Celery task that runs it (registered with `job_task(kind=...)` in the app that does the work).

A lower layer asks for work an upper one does (the order domain asks provisioning to move a rental's end on
its nodes) by naming the kind here, never the upper layer's module: the import contracts see no upward
import, and tests/core/test_job_kinds.py checks that every kind has exactly one task. A stored job keeps its
kind, so a name here never changes once released (core/jobs/migrations/0002 renamed the module paths they had before).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from celery import current_app


class JobKind(StrEnum):
    EMAIL_SEND = "orders.email_send"  # a customer email in the outbox (orders/outbox.py)
    STAFF_EMAIL = "orders.staff_email"  # a staff notification's email (orders/staff_notices.py)
    STAFF_WEBHOOK = "orders.staff_webhook"  # a staff notification's chat message
    ORDER_LOOKUP = "shop.order_lookup"  # "Find my order" (shop/order_lookup.py)
    NOTICE_VERIFY = "payments.notice_verify"  # an "I have paid" check (payments/notices.py)
    OUTFLOW_ALERT = "payments.outflow_alert"  # staff told of money leaving a deposit address
    PREPARATION_RUN = "provisioning.preparation_run"  # preparing one node for an order (provisioning/prepare.py)
    ACCESS_WITHDRAW = "provisioning.access_withdraw"  # taking access back from one grant
    ACCESS_EXTEND = "provisioning.access_extend"  # an applied extension's new end, on the order's nodes
    ACCESS_END_FOLLOW = "provisioning.access_end_follow"  # time credited or adjusted: the new end on the nodes
    ACCESS_GRACE = "provisioning.access_grace"  # the rental's end: the data window opens on one grant's node
    PREPARATION_AUTO = "provisioning.preparation_auto"  # AUTO_PREPARE: a paid order's preparation starts by itself
    ACCESS_KEY_REPLACE = "provisioning.access_key_replace"  # a customer's new SSH key, on the order's nodes
    PREPARATION_KEY_RETRY = "provisioning.preparation_key_retry"  # a refused key replaced: prepare again
    NODE_CHECK = "provisioning.node_check"  # an operator's or the daily check of one node
    NODE_MOVE = "provisioning.node_move"  # a rental moved to a spare node (provisioning/moves.py)
    NODE_MOVE_REVOKE = "provisioning.node_move_revoke"  # the moved rental's old node: its clean end of rental
    NODE_HEALTH = "provisioning.node_health"  # the health probe of one rented node (provisioning/rented_node_health.py)
    ACCESS_STATE = "provisioning.access_state"  # `b200` and the order's facts on its nodes (provisioning/b200_state.py)
    ACCESS_NOTICE = "provisioning.access_notice"  # the notice before the end, on one node (provisioning/end_notice.py)


JOB_TASKS: dict[str, Any] = {}  # kind -> its task, as the apps' task modules register them


def job_task_for(kind: str) -> Any:
    """The task registered for `kind`; the apps' task modules are imported first if it is not known yet (a web
    process imports none of its own). KeyError: no task runs this kind."""
    if kind not in JOB_TASKS:
        current_app.loader.import_default_modules()  # fires autodiscover_tasks: every app's `tasks` module
    return JOB_TASKS[kind]
