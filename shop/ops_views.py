"""The operator console, /ops/: what needs attention, paid orders waiting, preparations running, failures with
their reports. It sits in the shop, above provisioning and payments, because it shows and acts on both."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import npgettext, pgettext
from django.views.decorators.http import require_POST

from fleet.models import Node, NodeState
from orders.models import Order, OrderStatus
from payments.amount_text import movement_units_text, with_asset
from payments.models import UnexpectedOutflow
from payments.outflows import outflow_acknowledge
from provisioning.auto_prepare import preparation_stop, started_automatically
from provisioning.downtime import DecisionRefused, downtime_hold_decide, downtime_holds_waiting
from provisioning.models import DowntimeHold, NodeMove, PreparationRun, RunStatus
from provisioning.moves import (
    MoveRefused,
    ReleaseRefused,
    move_for_node,
    move_old_files_release,
    moves_keeping_files,
    moves_open,
    moves_waiting,
    nodes_movable,
)
from provisioning.node_checks import RECHECKABLE, RecheckRefused, checks_latest, recheck_start
from provisioning.prepare import PreparationError, preparation_start, preparation_stuck
from provisioning.rented_node_health import WATCHED, latest_health
from shop.ops_attention import KINDS, attention_for

OPERATOR = "provisioning.prepare_order"

P = ParamSpec("P")
# A console button's own part: given the request and the path's arguments, it acts and returns what to tell the
# operator (or None), or raises a refusal.
ButtonAction = Callable[Concatenate[HttpRequest, P], str | None]
ButtonView = Callable[Concatenate[HttpRequest, P], HttpResponse]


@login_required
@permission_required(OPERATOR, raise_exception=True)
def console(request: HttpRequest) -> HttpResponse:
    waiting = Order.objects.filter(status=OrderStatus.PAID).select_related("preparation").order_by("updated_at")
    preparing = list(Order.objects.filter(status=OrderStatus.PREPARING).prefetch_related("preparation_runs__node"))
    now = timezone.now()
    # "Restart what is stuck" only where something is
    stuck = {order.pk for order in preparing if preparation_stuck(order=order, now=now)}
    auto = {order.pk for order in preparing if started_automatically(order)}  # AUTO_PREPARE started it
    failed = Order.objects.filter(status=OrderStatus.PREPARATION_FAILED).prefetch_related("preparation_runs__node")
    active = Order.objects.filter(status=OrderStatus.ACTIVE).order_by("ends_at")[:50]
    nodes = list(Node.objects.all())
    latest = checks_latest(nodes)
    health = latest_health(
        node.pk for node in nodes
    )  # rented nodes' latest health probe (provisioning/rented_node_health.py)
    checking = False  # a recheck or probe still running on some node
    for node in nodes:  # each row shows its latest recheck or probe, and a recheck button when it is out of sale
        check = latest.get(node.pk)
        running = check is not None and check.finished_at is None
        checking = checking or running
        vars(node).update(  # what the row reads besides the node's own fields (templates/provisioning/console.html)
            latest_check=check,
            latest_health=health.get(node.pk) if node.state in WATCHED else None,
            recheckable=node.state in RECHECKABLE,
            latest_check_running=running,
        )
    moves = moves_open()
    mine = attention_for(request.user)
    unacknowledged = UnexpectedOutflow.objects.filter(acknowledged_at__isnull=True)
    outflows = [
        (outflow, movement_units_text(outflow))
        for outflow in with_asset(unacknowledged).select_related("payment__order", "network")
    ]
    return render(
        request,
        "provisioning/console.html",
        {
            # What waits on this person's role, oldest first, with where it is handled; what waits on other roles
            # is counted, with who acts on it (shop/ops_attention.py).
            "attention": [(KINDS[item.kind], item) for item in mine.mine],
            "attention_others": sorted(mine.others.items()),
            "waiting": waiting,
            "preparing": preparing,
            "stuck": stuck,
            "auto": auto,
            "failed": failed,
            "active": active,
            "nodes": nodes,
            "degraded": [node for node in nodes if node.state == NodeState.DEGRADED],
            # Moves of rentals to spare nodes still running, and those that ended without one (provisioning.moves).
            "moves": moves,
            "movable": nodes_movable(nodes),  # "Move to a spare node" on a degraded or failed node with a rental
            "moves_ended": moves_waiting(),
            "moves_keeping": moves_keeping_files(),
            "downtime_holds": downtime_holds_waiting(),
            # Money that left a deposit address for neither a refund nor the treasury (payments/outflows.py).
            "outflows": outflows,
            # How often static/js/ops-console.js looks for a change (it never reloads the page by itself): often
            # while something runs, and still now and then otherwise (a paid order, a node failing).
            "poll_seconds": 5 if preparing or moves or checking else 30,
        },
    )


def operator_button(*refusals: type[Exception]) -> Callable[[ButtonAction[P]], ButtonView[P]]:
    """The body every button of the console shares: an operator's POST runs the action; what it returns is shown
    as done (None: nothing to say), a refusal among `refusals` as an error, in its own words; then back to the
    console. Anyone else: the login page, or 403 when signed in without the role; a GET is 405."""

    def decorate(action: ButtonAction[P]) -> ButtonView[P]:
        def button(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            try:
                done = action(request, *args, **kwargs)
            except refusals as exc:
                messages.error(request, str(exc))
            else:
                if done is not None:
                    messages.success(request, done)
            return redirect("provisioning:console")

        functools.update_wrapper(button, action)  # its name and docstring, for the URLs and the reader
        return login_required(permission_required(OPERATOR, raise_exception=True)(require_POST(button)))

    return decorate


@operator_button(PreparationError)
def prepare(request: HttpRequest, reference: str) -> str:
    order = get_object_or_404(Order, reference=reference)
    preparation_start(order_id=order.pk, actor=request.user.get_username())
    return pgettext("staff", "%(order)s: preparation started") % {"order": order.reference}


@operator_button(PreparationError)
def stop(request: HttpRequest, reference: str) -> str:
    """The "Stop" button of a running preparation: its runs end, its access is withdrawn, the order waits for a
    person (provisioning/auto_prepare.py)."""
    order = get_object_or_404(Order, reference=reference)
    stopped = preparation_stop(order_id=order.pk, actor=request.user.get_username())
    words = npgettext(
        "staff",
        "%(order)s: preparation stopped (%(runs)s run ended)",
        "%(order)s: preparation stopped (%(runs)s runs ended)",
        stopped,
    )
    return words % {"order": order.reference, "runs": stopped}


@operator_button(RecheckRefused)
def node_recheck(request: HttpRequest, name: str) -> str:
    """The node row's "Recheck" button: the preflight without an order; a pass returns the node to sale."""
    node = get_object_or_404(Node, name=name)
    check = recheck_start(node=node, actor=request.user.get_username())
    return pgettext("staff", "%(node)s: recheck %(check)s started") % {"node": node.name, "check": check.pk}


@operator_button(MoveRefused)
def node_move(request: HttpRequest, name: str) -> str:
    """The node row's "Move to a spare node" button: its rental is prepared, copied and handed over elsewhere."""
    node = get_object_or_404(Node, name=name)
    move = move_for_node(node=node, actor=request.user.get_username())
    words = pgettext("staff", "%(node)s: move %(move)s %(status)s")
    return words % {"node": node.name, "move": move.pk, "status": move.get_status_display()}


@operator_button(ReleaseRefused)
def move_files_release(request: HttpRequest, move_id: int) -> str:
    """ "Release the files": the customer has what it needs from the old node (or staff decided otherwise); its
    clean end of rental starts."""
    move = get_object_or_404(NodeMove, pk=move_id)
    move_old_files_release(move_id=move.pk, actor=request.user.get_username())
    words = pgettext("staff", "%(node)s: the files kept for %(order)s are released")
    return words % {"node": move.from_node.name, "order": move.order.reference}


@operator_button(DecisionRefused)
def downtime_decide(request: HttpRequest, hold_id: int) -> str:
    """ "Give the time back" or "No time back" on a downtime held because the tenant could have caused it."""
    hold = get_object_or_404(DowntimeHold, pk=hold_id)
    give = request.POST.get("decision") == "credit"
    decided = downtime_hold_decide(hold_id=hold.pk, credit=give, actor=request.user.get_username())
    if decided.decision == "credited":
        words = pgettext("staff", "%(order)s: downtime on %(node)s given back")
    else:
        words = pgettext("staff", "%(order)s: downtime on %(node)s not given back")
    return words % {"order": hold.order.reference, "node": hold.node.name}


@operator_button()
def outflow_acknowledged(request: HttpRequest, outflow_id: int) -> str | None:
    """Someone has looked into an unexpected outflow: it leaves the console, its row keeps who and when."""
    outflow = get_object_or_404(UnexpectedOutflow, pk=outflow_id)
    if not outflow_acknowledge(outflow_id=outflow.pk, by=request.user.get_username()):
        return None  # no longer open: acknowledged already
    return pgettext("staff", "outflow %(tx)s: acknowledged") % {"tx": outflow.tx_hash}


@login_required
@permission_required(OPERATOR, raise_exception=True)
def run_report(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(PreparationRun.objects.select_related("order", "node"), pk=run_id)
    checks = (run.report or {}).get("checks", [])
    return render(request, "provisioning/run.html", {"run": run, "checks": checks, "RunStatus": RunStatus})
