"""The fleet: the GPU nodes the shop sells (one node is one lot of two cards), their states and their events.

Below the order domain: an order holds nodes (orders/capacity.py locks and counts them), provisioning
prepares them and gives access. Their tables keep the names they had in provisioning, where they were
created (each model's `db_table`; fleet/migrations/0001_initial.py). Their one writer is provisioning/states.py.
"""

from __future__ import annotations

import posixpath

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import pgettext_lazy

from core.transition_event import TransitionEvent


class NodeDriver(models.TextChoices):
    LOCAL = "local", pgettext_lazy("staff", "local (runs on this machine, development)")
    SSH = "ssh", pgettext_lazy("staff", "ssh")


class NodeState(models.TextChoices):
    AVAILABLE = "available", pgettext_lazy("staff", "available")
    ALLOCATED = "allocated", pgettext_lazy("staff", "allocated")
    PREPARING = "preparing", pgettext_lazy("staff", "preparing")
    IN_USE = "in_use", pgettext_lazy("staff", "in use")
    MAINTENANCE = "maintenance", pgettext_lazy("staff", "maintenance")
    FAILED = "failed", pgettext_lazy("staff", "failed")
    # Access given during a preparation that did not hand over is being removed from the node.
    REVOKING = "revoking", pgettext_lazy("staff", "revoking access")
    # Rented, and its health probe fails (unreachable, a card missing, XID, ECC, a link down): the tenant keeps
    # access while operators look; it recovers to in use, or its rental moves to a spare node.
    DEGRADED = "degraded", pgettext_lazy("staff", "degraded (rented, failing its health probe)")


# Nodes in these states are never offered for sale.
UNSELLABLE_STATES = (NodeState.MAINTENANCE, NodeState.FAILED, NodeState.REVOKING, NodeState.DEGRADED)


def scratch_folders(text: str) -> list[str]:
    """The scratch paths of a node, one a line, blank lines skipped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def validate_scratch_paths(text: str) -> None:
    for path in scratch_folders(text):
        if not path.startswith("/") or posixpath.normpath(path) != path:
            raise ValidationError(f"{path!r} is not a normalised absolute path: give one folder a line, e.g. /scratch.")


class Node(models.Model):
    name = models.CharField(max_length=100, unique=True, verbose_name=pgettext_lazy("staff", "name"))
    driver = models.CharField(
        max_length=10, choices=NodeDriver.choices, default=NodeDriver.SSH, verbose_name=pgettext_lazy("staff", "driver")
    )
    host = models.CharField(max_length=255, blank=True, verbose_name=pgettext_lazy("staff", "host"))
    port = models.PositiveIntegerField(default=22, verbose_name=pgettext_lazy("staff", "port"))
    user = models.CharField(max_length=64, blank=True, verbose_name=pgettext_lazy("staff", "user"))
    host_key = models.TextField(
        blank=True,
        help_text=pgettext_lazy("staff", "The node's SSH host public key, pinned."),
        verbose_name=pgettext_lazy("staff", "host key"),
    )
    gpu_model = models.CharField(
        max_length=100, default="NVIDIA B200", verbose_name=pgettext_lazy("staff", "GPU model")
    )
    gpu_count = models.PositiveSmallIntegerField(default=2, verbose_name=pgettext_lazy("staff", "GPU count"))
    python = models.CharField(
        max_length=255,
        default="python3",
        help_text=pgettext_lazy("staff", "The Python that runs the preflight."),
        verbose_name=pgettext_lazy("staff", "python"),
    )
    preflight_device = models.CharField(
        max_length=8,
        choices=[("cuda", "cuda"), ("cpu", "cpu (development)")],
        default="cuda",
        verbose_name=pgettext_lazy("staff", "preflight device"),
    )
    thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text=pgettext_lazy(
            "staff", "Preflight thresholds for this node (empty: the figures for its cards, see docs/provisioning.md)."
        ),
        verbose_name=pgettext_lazy("staff", "thresholds"),
    )
    accounts_root = models.CharField(
        max_length=255,
        blank=True,
        help_text=pgettext_lazy(
            "staff", "Empty: customer accounts are real accounts on the node. A directory: a sandboxed user database."
        ),
        verbose_name=pgettext_lazy("staff", "accounts root"),
    )
    access_tool = models.CharField(
        max_length=255,
        blank=True,
        help_text=pgettext_lazy(
            "staff",
            "Empty: the login is root and runs the access tool copied with each preparation. A path (e.g. "
            "/usr/local/sbin/b200-access): the login is not root; this shop's access tool, installed there by "
            "root, runs with `sudo -n` under the sudo rule of docs/production.md.",
        ),
        verbose_name=pgettext_lazy("staff", "access tool"),
    )
    scratch_paths = models.TextField(
        blank=True,
        validators=[validate_scratch_paths],
        help_text=pgettext_lazy(
            "staff",
            "The node's scratch folders, one absolute path a line (e.g. /scratch): swept for the tenant's files at "
            "the end of each rental, besides /tmp, /var/tmp, /dev/shm and the node's other local filesystems. Its "
            "own disks only: a folder shared with other machines is refused.",
        ),
        verbose_name=pgettext_lazy("staff", "scratch paths"),
    )
    state = models.CharField(
        max_length=16,
        choices=NodeState.choices,
        default=NodeState.AVAILABLE,
        verbose_name=pgettext_lazy("staff", "state"),
    )
    state_reason = models.CharField(max_length=300, blank=True, verbose_name=pgettext_lazy("staff", "state reason"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))

    class Meta:
        verbose_name = pgettext_lazy("staff", "node")
        verbose_name_plural = pgettext_lazy("staff", "nodes")
        db_table = "provisioning_node"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def scratch_folders(self) -> list[str]:
        return scratch_folders(self.scratch_paths)


class NodeEvent(TransitionEvent):
    """One row per change of a node's state (who, when, from, to, why), written by node_transition."""

    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, related_name="events", verbose_name=pgettext_lazy("staff", "node")
    )
    from_state = models.CharField(
        max_length=16, choices=NodeState.choices, verbose_name=pgettext_lazy("staff", "from state")
    )
    to_state = models.CharField(
        max_length=16, choices=NodeState.choices, verbose_name=pgettext_lazy("staff", "to state")
    )

    class Meta(TransitionEvent.Meta):
        verbose_name = pgettext_lazy("staff", "node event")
        verbose_name_plural = pgettext_lazy("staff", "node events")
        db_table = "provisioning_nodeevent"

    def __str__(self) -> str:
        return f"{self.node_id}: {self.get_from_state_display()} -> {self.get_to_state_display()}"
