"""One way to move a status: each of the six state machines' writers goes through core's status_move, and
every refusal is core's one TransitionNotAllowed (a move to the current status is a no-op for all of them; the
behaviour of each is tested with its model: tests/shop/test_order_lifecycle.py, tests/payments/
test_payment_state_table.py, tests/provisioning/test_state_tables.py, the refund and extension suites)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from core import transition_event
from orders.extensions import extension_transition
from orders.orders import order_transition
from payments.lifecycle import payment_transition
from payments.refunds import refund_transition
from provisioning.states import node_transition, run_transition

ROOT = Path(__file__).resolve().parents[2]
WRITERS = [
    order_transition,
    extension_transition,
    payment_transition,
    refund_transition,
    node_transition,
    run_transition,
]


def test_every_status_writer_moves_through_status_move():
    for writer in WRITERS:
        assert "status_move(" in inspect.getsource(writer), writer.__qualname__


def test_no_package_defines_a_refusal_of_its_own():
    own = []
    for path in ROOT.glob("*/**/*.py"):
        if path.parts[len(ROOT.parts)] in {"tests", "node_modules", "bench", "scripts"} or ".venv" in path.parts:
            continue
        own += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"class (\w*NotAllowed)\b", path.read_text())]
    assert own == ["core/transition_event.py: TransitionNotAllowed"]
    assert issubclass(transition_event.TransitionNotAllowed, ValueError)
