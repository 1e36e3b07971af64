"""One way to move a status: every state machine's writer goes through core's status_move, and every refusal is
core's one TransitionNotAllowed (a move to the current status is a no-op for all of them; the behaviour of each is
tested with its model: tests/orders/test_order_lifecycle.py, tests/payments/test_payment_state_table.py,
tests/provisioning/test_state_tables.py, the refund, extension and node move suites).

Nothing here is listed by hand. The state machines are the models with a `status` or `state` field that has
choices (Django's registry); the writers are the functions that call status_move (an AST walk of every package
in pyproject.toml's import contracts, a new module included); a status written anywhere else (an assignment,
`update(status=...)`, `save(update_fields=["status"])`, `bulk_update`, `setattr`, an admin form) fails the
suite. The walk is checked on a copy of the code with rogue writes added."""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import models
from django.test import RequestFactory

from core import transition_event
from core.transition_event import status_move

ROOT = Path(__file__).resolve().parents[2]
STATUS_NAMES = frozenset({"status", "state"})
DEFAULT_FIELD = inspect.signature(status_move).parameters["field"].default
# The ORM calls that write the fields their keywords (or their `defaults`) name, and those that write the fields
# a list of names gives (`save(update_fields=[...])`, `bulk_update(rows, [...])`).
WRITES_KEYWORDS = frozenset({"update", "update_or_create"})
WRITES_LISTED = frozenset({"save", "bulk_update"})


def _import_contracts() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def _packages() -> list[str]:
    return _import_contracts()["root_packages"]


def _without_django() -> list[str]:
    """Packages a contract keeps free of Django (the signer, the programs that run on a node): they hold no model,
    so what they call `status` (a journal line's, a process's) is not a state machine's."""
    return [
        source
        for contract in _import_contracts()["contracts"]
        if "django" in contract.get("forbidden_modules", [])
        for source in contract["source_modules"]
    ]


def _sources(root: Path, packages: list[str], skip: list[str]) -> list[tuple[str, ast.Module]]:
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            module = ".".join(relative.with_suffix("").parts)
            if "migrations" in relative.parts or any(module == s or module.startswith(f"{s}.") for s in skip):
                continue
            found.append((str(relative), ast.parse(path.read_text(), filename=str(relative))))
    return found


@dataclass(frozen=True)
class MoveCall:
    """One call of status_move: the function making it (the writer) and what it moves."""

    where: str
    writer: str
    event_model: str
    link: str
    field: str


def _constant(node: ast.expr | None, default: object = None) -> object:
    return node.value if isinstance(node, ast.Constant) else default


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _enclosing(tree: ast.Module) -> dict[ast.AST, tuple[str, str]]:
    """Each node of the tree, mapped to the names of the class and the function it is in ('' where none)."""
    inside: dict[ast.AST, tuple[str, str]] = {}

    def walk(node: ast.AST, cls: str, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                inside[child] = (child.name, "")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inside[child] = (cls, child.name)
            else:
                inside[child] = (cls, function)
            walk(child, *inside[child])

    walk(tree, "", "")
    return inside


def status_move_calls(sources: list[tuple[str, ast.Module]]) -> list[MoveCall]:
    calls = []
    for where, tree in sources:
        inside = _enclosing(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node) == "status_move":
                keywords = {k.arg: k.value for k in node.keywords if k.arg}
                event = keywords.get("event_model")
                calls.append(
                    MoveCall(
                        where=f"{where}:{node.lineno}",
                        writer=inside[node][1],
                        event_model=event.id if isinstance(event, ast.Name) else "",
                        link=str(_constant(keywords.get("link"), "")),
                        field=str(_constant(keywords.get("field"), DEFAULT_FIELD)),
                    )
                )
    return calls


def _names_listed(node: ast.expr) -> set[str]:
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return {str(e.value) for e in node.elts if isinstance(e, ast.Constant)}
    return set()


def _dict_keys(node: ast.expr | None) -> set[str]:
    if isinstance(node, ast.Dict):
        return {str(k.value) for k in node.keys if isinstance(k, ast.Constant)}
    return set()


def _written(node: ast.AST, plain_self: bool) -> set[str]:
    """The field names this node writes, as far as the source says it. `plain_self`: the node is in a class that
    is no model, whose own attributes (`self.status` of an exception, a dataclass) are no model's status."""
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {
            target.attr
            for top in targets
            for target in ast.walk(top)
            if isinstance(target, ast.Attribute)
            and isinstance(target.ctx, ast.Store)
            and not (plain_self and isinstance(target.value, ast.Name) and target.value.id == "self")
        }
    if not isinstance(node, ast.Call):
        return set()
    name = _called_name(node)
    if name == "setattr" and len(node.args) >= 2:
        return {str(_constant(node.args[1], ""))}
    if name in WRITES_KEYWORDS:
        named = {k.arg for k in node.keywords if k.arg and k.arg != "defaults"}
        unpacked = {key for k in node.keywords if k.arg is None for key in _dict_keys(k.value)}
        defaults = {key for k in node.keywords if k.arg == "defaults" for key in _dict_keys(k.value)}
        return named | unpacked | defaults
    if name in WRITES_LISTED:
        listed = [k.value for k in node.keywords if k.arg in {"update_fields", "fields"}] + node.args[1:]
        return {field for value in listed for field in _names_listed(value)}
    return set()


def status_writes(sources: list[tuple[str, ast.Module]], fields: set[str]) -> list[str]:
    """Every place the source writes one of these fields itself, outside status_move's body."""
    model_names = {model.__name__ for model in apps.get_models()}
    found = []
    for where, tree in sources:
        inside = _enclosing(tree)
        for node in ast.walk(tree):
            written = _written(node, plain_self=inside.get(node, ("", ""))[0] not in model_names) & fields
            if written:
                found.append((where, node.lineno, ", ".join(sorted(written))))
    return [f"{where}:{line}: {names}" for where, line, names in sorted(found)]


def state_machines() -> dict[type[models.Model], str]:
    """Every model with a status: a `status` or `state` field with choices (the event rows' from/to excepted)."""
    found = {}
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if field.name in STATUS_NAMES and field.choices:
                found[model] = field.name
    return found


def _source_tree() -> list[tuple[str, ast.Module]]:
    return _sources(ROOT, _packages(), _without_django())


def _moved_model(call: MoveCall) -> type[models.Model] | None:
    event = next((m for m in apps.get_models() if m.__name__ == call.event_model), None)
    return event._meta.get_field(call.link).related_model if event else None


def test_every_model_with_a_status_has_a_writer_that_moves_through_status_move():
    calls = status_move_calls(_source_tree())
    machines = state_machines()
    assert len(machines) >= 7, machines  # order, extension, payment, refund, node, preparation run, node move
    moved = {(_moved_model(call), call.field) for call in calls}
    unmoved = [f"{model.__name__}.{field}" for model, field in machines.items() if (model, field) not in moved]
    assert unmoved == [], f"no writer calls status_move for {unmoved}; the writers found: {calls}"


def test_every_status_move_names_a_state_machine_and_comes_from_one_named_writer():
    machines = state_machines()
    for call in status_move_calls(_source_tree()):
        model = _moved_model(call)
        assert model is not None and machines.get(model) == call.field, call
        assert call.writer.endswith("_transition"), call  # <model>_transition, as the style names them


def test_no_status_is_written_outside_status_move():
    fields = set(state_machines().values())
    assert status_writes(_source_tree(), fields) == []


def test_no_admin_page_edits_a_status():
    request = RequestFactory().get("/")
    request.user = User(username="admin", is_active=True, is_staff=True, is_superuser=True)
    editable, checked = [], []
    for model, field in state_machines().items():
        model_admin = admin.site._registry.get(model)
        if model_admin is None:
            continue
        checked.append(model.__name__)
        writes = model_admin.has_add_permission(request) or model_admin.has_change_permission(request)
        if writes and (field in model_admin.get_form(request).base_fields or field in model_admin.list_editable):
            editable.append(f"{model.__name__}.{field}")
    assert "Order" in checked, checked  # the admin's registry is filled
    assert editable == []


ROGUE = """
from orders.models import Order, OrderEvent
from core.transition_event import status_move


def order_rushed(order, nodes):
    order.status = "paid"
    Order.objects.filter(pk=order.pk).update(status="paid")
    Order.objects.filter(pk=order.pk).update(**{"status": "paid"})
    Order.objects.update_or_create(pk=1, defaults={"status": "paid"})
    order.save(update_fields=["status", "updated_at"])
    Order.objects.bulk_update([order], ["status"])
    setattr(nodes[0], "state", "failed")
    nodes[0].state, nodes[1].state = "failed", "failed"


def order_sideways(order):
    return status_move(row=order, to="paid", table={}, event_model=OrderEvent, link="order", actor="", reason="",
                       now=None)


def response(order):
    order.save(update_fields=["updated_at"])
    return dict(order=order).update(reason="quiet")


class Refund:
    def refund_hurried(self):
        self.status = "sent"


class Reply:
    def __init__(self, status):
        self.status = status
"""


def test_a_status_written_outside_the_mover_is_found_on_a_copy_of_the_code(tmp_path):
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "rogue.py").write_text(ROGUE)
    sources = _sources(tmp_path, ["orders"], [])
    writes = status_writes(sources, {"status", "state"})
    assert [re.sub(r"^orders/rogue.py:", "", w) for w in writes] == [
        "7: status",
        "8: status",
        "9: status",
        "10: status",
        "11: status",
        "12: status",
        "13: state",
        "14: state",
        "29: status",
    ]
    (call,) = status_move_calls(sources)
    order = apps.get_model("orders", "Order")
    assert (call.writer, _moved_model(call), call.field) == ("order_sideways", order, "status")
    with_it = _sources(ROOT, _packages(), _without_django()) + sources
    misnamed = [c for c in status_move_calls(with_it) if not c.writer.endswith("_transition")]
    assert [c.writer for c in misnamed] == ["order_sideways"]


def test_no_package_defines_a_refusal_of_its_own():
    own = []
    for path in ROOT.glob("*/**/*.py"):
        if path.parts[len(ROOT.parts)] in {"tests", "node_modules", "bench", "scripts"} or ".venv" in path.parts:
            continue
        own += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"class (\w*NotAllowed)\b", path.read_text())]
    assert own == ["core/transition_event.py: TransitionNotAllowed"]
    assert issubclass(transition_event.TransitionNotAllowed, ValueError)
