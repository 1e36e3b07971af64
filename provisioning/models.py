"""Preparation runs, access grants, manifests and node checks. The nodes are the fleet's (fleet/models.py)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from core.transition_event import TransitionEvent
from fleet.models import (  # noqa: F401 - the fleet's rows are provisioning's models (app label) too
    UNSELLABLE_STATES,
    Node,
    NodeDriver,
    NodeEvent,
    NodeState,
    scratch_folders,
    validate_scratch_paths,
)


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
    # After the rental's end: processes stopped and cards freed, the key limited to read-only SFTP until then
    # (DATA_GRACE_HOURS), and only then the clean end of rental. Empty: no window (yet).
    grace_until = models.DateTimeField(null=True, blank=True, help_text="Read-only SFTP allowed until then.")

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

    @property
    def sftp_command(self) -> str:
        """What downloads the files in the data window (sftp and scp take the port as -P)."""
        port = f" -P {self.port}" if self.port != 22 else ""
        return f"sftp{port} {self.account}@{self.host}"

    @property
    def scp_command(self) -> str:
        port = f" -P {self.port}" if self.port != 22 else ""
        return f"scp{port} -r {self.account}@{self.host}:checkpoints ."


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


class CheckKind(models.TextChoices):
    RECHECK = "recheck", "recheck (an operator's, the whole preflight)"
    PROBE = "probe", "probe (beat's daily, reachability and idle cards)"


class NodeCheck(models.Model):
    """A check of a node between rentals, without an order: an operator's recheck of a failed or maintenance
    node (the preflight a preparation runs; a pass returns it to sale) or beat's daily probe of an idle node
    (reachable with its pinned host key, no process on its cards; a failure sets it aside). No status table:
    open while `finished_at` is empty, then `passed` says how it ended; at most one is open per node."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="checks")
    kind = models.CharField(max_length=10, choices=CheckKind.choices)
    requested_by = models.CharField(max_length=150, help_text="The operator, or system (beat's probe).")
    preparation = models.ForeignKey(
        "shop.Preparation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        help_text="A recheck runs this preparation's setup step and preflight profile.",
    )
    step = models.CharField(max_length=40, blank=True, help_text="What the check is doing now.")
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent.")
    log = models.TextField(blank=True)
    # A worker lost mid-check: the job runs again, as the next attempt, and clears what the lost one left.
    attempt = models.PositiveSmallIntegerField(default=0)
    node_workdir = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    passed = models.BooleanField(null=True, help_text="Empty while the check runs.")
    reason = models.TextField(blank=True, help_text="Why it failed, or what it found.")
    report = models.JSONField(null=True, blank=True)
    report_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=models.Q(finished_at__isnull=True), name="one_open_check_per_node"
            ),
        ]
        # The console's latest check per node (core/latest_rows.py): one index probe per node.
        indexes = [models.Index(fields=["node", "-created_at", "-id"], name="node_check_latest")]

    def __str__(self) -> str:
        outcome = "running" if self.finished_at is None else ("passed" if self.passed else "failed")
        return f"{self.kind} {self.pk} of {self.node_id} ({outcome})"


class NodeHealth(models.Model):
    """One health probe of a rented node (every NODE_HEALTH_PROBE_MINUTES while access is live): reached over
    SSH with its pinned host key, read without loading the cards or reading the tenant's files. `findings` is
    the node tool's list of {check, status, detail}; `kernel_cursor` where its kernel log was read up to, so
    that the next probe reports only new XID errors. Pruned by age (NODE_HEALTH_KEEP_DAYS)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_probes")
    order = models.ForeignKey(
        "shop.Order", on_delete=models.SET_NULL, null=True, blank=True, related_name="health_probes"
    )
    checked_at = models.DateTimeField(default=timezone.now)
    reachable = models.BooleanField()
    healthy = models.BooleanField()
    findings = models.JSONField(default=list, blank=True)
    summary = models.TextField(blank=True, help_text="What is wrong, in words (empty when healthy).")
    kernel_cursor = models.CharField(max_length=100, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-checked_at", "-pk"]
        indexes = [models.Index(fields=["node", "-checked_at"], name="node_health_latest")]

    def __str__(self) -> str:
        return f"health of {self.node_id} at {self.checked_at:%Y-%m-%d %H:%M} ({'ok' if self.healthy else 'failing'})"


class DowntimeHold(models.Model):
    """A degraded episode whose every failing finding a tenant's own program could have caused (a slowdown under
    its load, an XID read from the kernel log, a node too loaded to answer): its downtime is not given back
    until a person decides (issue 39). One per episode; `decision` is written once, by provisioning.downtime."""

    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="downtime_holds")
    order = models.ForeignKey("shop.Order", on_delete=models.CASCADE, related_name="downtime_holds")
    down_from = models.DateTimeField()
    down_until = models.DateTimeField()
    causes = models.TextField(help_text="The failing findings of the episode's probes, in words.")
    created_at = models.DateTimeField(default=timezone.now)
    decision = models.CharField(
        max_length=16, blank=True, choices=[("", "undecided"), ("credited", "credited"), ("declined", "declined")]
    )
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    credit = models.ForeignKey("shop.RentalCredit", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["order", "node", "down_from"], name="one_downtime_hold_per_episode")
        ]

    def __str__(self) -> str:
        return f"downtime of {self.node_id} for {self.order_id} from {self.down_from:%Y-%m-%d %H:%M} ({self.decision})"


class MoveStatus(models.TextChoices):
    REQUESTED = "requested", "requested"
    PREPARING = "preparing", "preparing the spare node"  # its preparation run: setup and the full preflight
    COPYING = "copying", "copying the tenant's data"
    HANDING_OVER = "handing_over", "handing over the new node"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    NO_NODE = "no_node", "no spare node free"


class NodeMove(models.Model):
    """An operator's move of a rental from a degraded or failed node to a spare one: the spare is prepared
    with the order's preparation and preflight (`run`), the tenant's home and scratch checkpoints are copied
    node to node when the old node answers (`copy_report`: what was and was not copied), the new access is
    handed over with a new manifest revision naming both nodes, then the old node gets the clean end of rental.
    One status table and one writer (provisioning.moves)."""

    order = models.ForeignKey("shop.Order", on_delete=models.PROTECT, related_name="node_moves")
    from_node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="moves_from")
    to_node = models.ForeignKey(Node, on_delete=models.PROTECT, null=True, blank=True, related_name="moves_to")
    run = models.ForeignKey(PreparationRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    status = models.CharField(max_length=16, choices=MoveStatus.choices, default=MoveStatus.REQUESTED)
    requested_by = models.CharField(max_length=150)
    reason = models.TextField(blank=True)
    copy_report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The copy left files behind (or the old node did not answer): the old node keeps them, read-only for the
    # customer, and nothing wipes them before the rental's end unless a person decides so (issue 39).
    old_files_kept_at = models.DateTimeField(null=True, blank=True)
    old_files_released_by = models.CharField(max_length=150, blank=True)
    old_files_released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["from_node"],
                condition=models.Q(status__in=["requested", "preparing", "copying", "handing_over"]),
                name="one_open_move_per_node",
            ),
        ]

    def __str__(self) -> str:
        return f"move {self.pk} of {self.order_id}: {self.from_node_id} -> {self.to_node_id} ({self.status})"


class NodeMoveEvent(TransitionEvent):
    """One row per change of a move's status (who, when, from, to, why)."""

    move = models.ForeignKey(NodeMove, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, choices=MoveStatus.choices)
    to_status = models.CharField(max_length=16, choices=MoveStatus.choices)

    def __str__(self) -> str:
        return f"{self.move_id}: {self.from_status} -> {self.to_status}"
