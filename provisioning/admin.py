from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.translation import pgettext, pgettext_lazy

from core.admin_base import ReadOnlyAdmin, ReadOnlyInline, reason_asked
from core.transition_event import TransitionNotAllowed
from fleet.models import Node, NodeEvent, NodeState
from provisioning.models import AccessGrant, Manifest, NodeCheck, PreparationRun, PreparationRunEvent
from provisioning.states import node_state_set

if TYPE_CHECKING:
    from django.forms import ModelForm

    _NodeAdminBase = admin.ModelAdmin[Node]
else:  # Django's ModelAdmin takes no subscript at run time
    _NodeAdminBase = admin.ModelAdmin


class NodeEventInline(ReadOnlyInline):
    model = NodeEvent
    fields = ["created_at", "from_state", "to_state", "actor", "reason"]


class PreparationRunEventInline(ReadOnlyInline):
    model = PreparationRunEvent
    fields = ["created_at", "from_status", "to_status", "actor", "reason"]


@admin.register(Node)
class NodeAdmin(_NodeAdminBase):
    list_display = ["name", "driver", "host", "port", "gpu_model", "gpu_count", "state", "state_reason"]
    list_filter = ["driver", "state"]
    search_fields = ["name", "host"]
    # The state moves only through node_transition: the actions below, or the preparation itself.
    readonly_fields = ["state", "state_reason"]
    actions = ["put_in_maintenance", "return_to_service"]
    inlines = [NodeEventInline]

    def save_model(self, request: HttpRequest, obj: Node, form: ModelForm[Node], change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
        elif form.changed_data:  # only what was edited: a state moved meanwhile is not written back
            obj.save(update_fields=form.changed_data)

    @admin.action(
        description=pgettext_lazy("staff", "Put the selected nodes in maintenance (out of sale)"),
        permissions=["change"],
    )
    def put_in_maintenance(self, request: HttpRequest, queryset: QuerySet[Node]) -> HttpResponse | None:
        items = [f"{node.name}: {node.get_state_display()}" for node in queryset]
        title = pgettext("staff", "Put in maintenance")
        reason, page = reason_asked(self, request, queryset, title=title, items=items)
        if reason is None:
            return page  # the reason is shown on the node and kept in its events
        self._move(request, queryset, to=NodeState.MAINTENANCE, reason=reason)
        return None

    @admin.action(
        description=pgettext_lazy("staff", "Return the selected nodes to service (available)"), permissions=["change"]
    )
    def return_to_service(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self._move(request, queryset, to=NodeState.AVAILABLE, reason="returned to service in the admin")

    def _move(self, request: HttpRequest, queryset: QuerySet[Node], *, to: str, reason: str) -> None:
        for node in queryset:
            try:
                moved = node_state_set(node_id=node.pk, to=to, actor=request.user.get_username(), reason=reason)
            except TransitionNotAllowed:
                refused = pgettext("staff", "%(node)s: cannot move from %(from)s to %(to)s")
                refused %= {"node": node.name, "from": NodeState(node.state).label, "to": NodeState(to).label}
                self.message_user(request, refused, messages.WARNING)
            else:
                if moved:
                    done = pgettext("staff", "%(node)s: %(state)s")
                else:
                    done = pgettext("staff", "%(node)s: already %(state)s")
                self.message_user(request, done % {"node": node.name, "state": NodeState(to).label})


@admin.register(NodeCheck)
class NodeCheckAdmin(ReadOnlyAdmin):
    """Rechecks and probes of nodes between rentals (provisioning.node_checks): who, when, the outcome, why."""

    list_display = ["node", "kind", "requested_by", "created_at", "finished_at", "passed", "reason"]
    list_filter = ["kind", "passed", "node"]
    list_select_related = ["node"]
    search_fields = ["node__name", "reason"]


@admin.register(PreparationRun)
class PreparationRunAdmin(ReadOnlyAdmin):
    list_display = ["order", "node", "status", "step", "progress", "created_at", "finished_at"]
    list_filter = ["status"]
    list_select_related = ["order", "node"]
    inlines = [PreparationRunEventInline]


@admin.register(AccessGrant)
class AccessGrantAdmin(ReadOnlyAdmin):
    list_display = ["order", "node", "account", "host", "port", "ends_at", "revoked_at"]
    list_select_related = ["order", "node"]


@admin.register(Manifest)
class ManifestAdmin(ReadOnlyAdmin):
    list_display = ["order", "created_at"]


@admin.register(NodeEvent)
class NodeEventAdmin(ReadOnlyAdmin):
    """Every node's state changes across the fleet, newest first (each node's own are inline on its page)."""

    list_display = ["created_at", "node", "from_state", "to_state", "actor", "reason"]
    list_filter = ["to_state", "node"]
    list_select_related = ["node"]
    search_fields = ["node__name", "actor"]
    ordering = ["-created_at", "-pk"]
