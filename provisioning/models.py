"""GPU nodes: one node is one lot of two cards. Preparation and access come with provisioning."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from config.transition_event import TransitionEvent


class NodeDriver(models.TextChoices):
    LOCAL = "local", "local (runs on this machine, development)"
    SSH = "ssh", "ssh"


class NodeState(models.TextChoices):
    AVAILABLE = "available", "available"
    ALLOCATED = "allocated", "allocated"
    PREPARING = "preparing", "preparing"
    IN_USE = "in_use", "in use"
    MAINTENANCE = "maintenance", "maintenance"
    FAILED = "failed", "failed"
    # Access given during a preparation that did not hand over is being removed from the node.
    REVOKING = "revoking", "revoking access"


# Nodes in these states are never offered for sale.
UNSELLABLE_STATES = (NodeState.MAINTENANCE, NodeState.FAILED, NodeState.REVOKING)


class Node(models.Model):
    name = models.CharField(max_length=100, unique=True)
    driver = models.CharField(max_length=10, choices=NodeDriver.choices, default=NodeDriver.SSH)
    host = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(default=22)
    user = models.CharField(max_length=64, blank=True)
    host_key = models.TextField(blank=True, help_text="The node's SSH host public key, pinned.")
    gpu_model = models.CharField(max_length=100, default="NVIDIA B200")
    gpu_count = models.PositiveSmallIntegerField(default=2)
    python = models.CharField(max_length=255, default="python3", help_text="The Python that runs the preflight.")
    preflight_device = models.CharField(
        max_length=8, choices=[("cuda", "cuda"), ("cpu", "cpu (development)")], default="cuda"
    )
    thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text="Preflight thresholds for this node (empty: the figures for its cards, see the README).",
    )
    accounts_root = models.CharField(
        max_length=255,
        blank=True,
        help_text="Empty: customer accounts are real accounts on the node. A directory: a sandboxed user database.",
    )
    access_tool = models.CharField(
        max_length=255,
        blank=True,
        help_text=(
            "Empty: the login is root and runs the access tool copied with each preparation. A path (e.g. "
            "/usr/local/sbin/b200-access): the login is not root; this shop's access tool, installed there by "
            "root, runs with `sudo -n` under the README's sudo rule."
        ),
    )
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.AVAILABLE)
    state_reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NodeEvent(TransitionEvent):
    """One row per change of a node's state (who, when, from, to, why), written by node_transition."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=16, choices=NodeState.choices)
    to_state = models.CharField(max_length=16, choices=NodeState.choices)

    def __str__(self) -> str:
        return f"{self.node_id}: {self.from_state} -> {self.to_state}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    PASSED = "passed", "passed"
    FAILED = "failed", "failed"  # the preflight ran and a check failed
    ERROR = "error", "error"  # the node could not be reached, timed out, or the run broke
    # The order's own input (its SSH key) cannot be installed: the order's step fails, the node is fine.
    REFUSED = "refused", "refused"


class PreparationRun(models.Model):
    """One attempt to prepare one node for an order: connect, copy, set up, preflight, grant access."""

    order = models.ForeignKey("shop.Order", on_delete=models.CASCADE, related_name="preparation_runs")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="preparation_runs")
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    step = models.CharField(max_length=40, blank=True, help_text="What the run is doing now.")
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent.")
    log = models.TextField(blank=True)
    report = models.JSONField(null=True, blank=True)
    report_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.CharField(max_length=150)
    # A worker that dies mid-run leaves the run `running`; its task is delivered again and the run starts
    # over as the next attempt. Only the latest attempt may write the outcome.
    attempt = models.PositiveSmallIntegerField(default=0)
    node_workdir = models.CharField(
        max_length=255, blank=True, help_text="The attempt's scratch directory on the node (cleared by the next)."
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("prepare_order", "Can trigger and retry the preparation of a paid order")]
        constraints = [
            models.UniqueConstraint(
                fields=["order", "node"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_open_run_per_order_node",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}: {self.order_id} on {self.node_id} ({self.status})"


class PreparationRunEvent(TransitionEvent):
    """One row per change of a run's status (who, when, from, to, why), written by run_transition."""

    run = models.ForeignKey(PreparationRun, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=10, choices=RunStatus.choices)
    to_status = models.CharField(max_length=10, choices=RunStatus.choices)

    def __str__(self) -> str:
        return f"{self.run_id}: {self.from_status} -> {self.to_status}"


class AccessGrantQuerySet(models.QuerySet):
    def live(self) -> AccessGrantQuerySet:
        """Rows whose account may exist on the node: each is revoked some day (no account without one)."""
        return self.filter(revoked_at__isnull=True)

    def handed_over(self) -> AccessGrantQuerySet:
        """Live access the customer holds: not access being withdrawn from a preparation that failed."""
        return self.live().filter(withdrawing_since__isnull=True)

    def withdrawing(self) -> AccessGrantQuerySet:
        return self.live().filter(withdrawing_since__isnull=False)


class AccessGrant(models.Model):
    """A customer's account on one node, bound to the order for its whole term.

    The row is written before the account is made on the node, so that every account has a row that will
    revoke it; access made during a preparation that does not hand over is withdrawn (`withdrawing_since`)."""

    order = models.ForeignKey("shop.Order", on_delete=models.CASCADE, related_name="access_grants")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="access_grants")
    account = models.CharField(max_length=32)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    host_key_fingerprint = models.CharField(max_length=100)
    ssh_key_fingerprint = models.CharField(max_length=100)
    granted_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    withdrawing_since = models.DateTimeField(
        null=True, blank=True, help_text="Given during a preparation that did not hand over: being removed."
    )
    reminders_sent = models.JSONField(default=list, blank=True, help_text="Hours before the end already reminded.")

    objects = AccessGrantQuerySet.as_manager()

    class Meta:
        ordering = ["granted_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=models.Q(revoked_at__isnull=True), name="one_live_grant_per_node"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.account}@{self.host}:{self.port}"

    @property
    def ssh_command(self) -> str:
        port = f" -p {self.port}" if self.port != 22 else ""
        return f"ssh{port} {self.account}@{self.host}"


class Manifest(models.Model):
    """The signed chain of evidence handed to the customer with access."""

    order = models.OneToOneField("shop.Order", on_delete=models.CASCADE, related_name="manifest")
    body = models.JSONField()
    signature = models.CharField(max_length=200, help_text="Ed25519 over the canonical JSON, base64.")
    public_key = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)
    # Earlier signed revisions, oldest first ({body, signature, public_key}): an extension signs a new one whose
    # body names the previous one's hash (`previous_body_sha256`).
    previous = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"manifest of {self.order_id}"
