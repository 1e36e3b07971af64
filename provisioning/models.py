"""Preparation runs, access grants, manifests and node checks. The nodes are the fleet's (fleet/models.py)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import pgettext, pgettext_lazy

from core.transition_event import TransitionEvent
from fleet.models import (  # noqa: F401 - re-exported: most callers import the nodes from here
    UNSELLABLE_STATES,
    Node,
    NodeDriver,
    NodeEvent,
    NodeState,
    scratch_folders,
    validate_scratch_paths,
)


class RunStatus(models.TextChoices):
    QUEUED = "queued", pgettext_lazy("staff", "queued")
    RUNNING = "running", pgettext_lazy("staff", "running")
    PASSED = "passed", pgettext_lazy("staff", "passed")
    FAILED = "failed", pgettext_lazy("staff", "failed")  # the preflight ran and a check failed
    ERROR = "error", pgettext_lazy("staff", "error")  # the node could not be reached, timed out, or the run broke
    # The order's own input (its SSH key) cannot be installed: the order's step fails, the node is fine.
    REFUSED = "refused", pgettext_lazy("staff", "refused")


# What a run or a check writes in `step` (provisioning.node_steps, claims, prepare, node_checks), as staff read it:
# the row keeps the English words (the logs, the API, the tests), the pages show them in the reader's language.
STEP_LABELS = {
    "connecting": pgettext_lazy("staff", "connecting"),
    "copying the preflight": pgettext_lazy("staff", "copying the preflight"),
    "setting up the environment": pgettext_lazy("staff", "setting up the environment"),
    "running the GPU preflight": pgettext_lazy("staff", "running the GPU preflight"),
    "reading the report": pgettext_lazy("staff", "reading the report"),
    "granting access": pgettext_lazy("staff", "granting access"),
    "proving the login": pgettext_lazy("staff", "proving the login"),
    "done": pgettext_lazy("staff", "done"),
    "stopped": pgettext_lazy("staff", "stopped"),
}


def step_label(step: str) -> str:
    """The step in the reader's language; "queued" before the first."""
    return str(STEP_LABELS.get(step, step)) if step else str(RunStatus.QUEUED.label)


class PreparationRun(models.Model):
    """One attempt to prepare one node for an order: connect, copy, set up, preflight, grant access."""

    order = models.ForeignKey(
        "orders.Order",
        on_delete=models.CASCADE,
        related_name="preparation_runs",
        verbose_name=pgettext_lazy("staff", "order"),
    )
    node = models.ForeignKey(
        Node, on_delete=models.PROTECT, related_name="preparation_runs", verbose_name=pgettext_lazy("staff", "node")
    )
    status = models.CharField(
        max_length=10,
        choices=RunStatus.choices,
        default=RunStatus.QUEUED,
        verbose_name=pgettext_lazy("staff", "status"),
    )
    step = models.CharField(
        max_length=40,
        blank=True,
        help_text=pgettext_lazy("staff", "What the run is doing now."),
        verbose_name=pgettext_lazy("staff", "step"),
    )
    progress = models.PositiveSmallIntegerField(
        default=0, help_text=pgettext_lazy("staff", "Percent."), verbose_name=pgettext_lazy("staff", "progress")
    )
    log = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "log"))
    report = models.JSONField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "report"))
    report_sha256 = models.CharField(max_length=64, blank=True, verbose_name=pgettext_lazy("staff", "report SHA-256"))
    error = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "error"))
    requested_by = models.CharField(max_length=150, verbose_name=pgettext_lazy("staff", "requested by"))
    # A worker that dies mid-run leaves the run `running`; its task is delivered again and the run starts
    # over as the next attempt. Only the latest attempt may write the outcome.
    attempt = models.PositiveSmallIntegerField(default=0, verbose_name=pgettext_lazy("staff", "attempt"))
    node_workdir = models.CharField(
        max_length=255,
        blank=True,
        help_text=pgettext_lazy("staff", "The attempt's scratch directory on the node (cleared by the next)."),
        verbose_name=pgettext_lazy("staff", "node workdir"),
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    started_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "started at"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "finished at"))

    class Meta:
        verbose_name = pgettext_lazy("staff", "preparation run")
        verbose_name_plural = pgettext_lazy("staff", "preparation runs")
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
        words = pgettext("staff", "run %(run)s: %(order)s on %(node)s (%(status)s)")
        return words % {
            "run": self.pk,
            "order": self.order_id,
            "node": self.node_id,
            "status": self.get_status_display(),
        }

    @property
    def step_shown(self) -> str:
        return step_label(self.step)


class PreparationRunEvent(TransitionEvent):
    """One row per change of a run's status (who, when, from, to, why), written by run_transition."""

    run = models.ForeignKey(
        PreparationRun, on_delete=models.CASCADE, related_name="events", verbose_name=pgettext_lazy("staff", "run")
    )
    from_status = models.CharField(
        max_length=10, choices=RunStatus.choices, verbose_name=pgettext_lazy("staff", "from status")
    )
    to_status = models.CharField(
        max_length=10, choices=RunStatus.choices, verbose_name=pgettext_lazy("staff", "to status")
    )

    class Meta(TransitionEvent.Meta):
        verbose_name = pgettext_lazy("staff", "preparation run event")
        verbose_name_plural = pgettext_lazy("staff", "preparation run events")

    def __str__(self) -> str:
        return f"{self.run_id}: {self.get_from_status_display()} -> {self.get_to_status_display()}"


class AccessGrantQuerySet(models.QuerySet["AccessGrant"]):
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

    order = models.ForeignKey(
        "orders.Order",
        on_delete=models.CASCADE,
        related_name="access_grants",
        verbose_name=pgettext_lazy("staff", "order"),
    )
    node = models.ForeignKey(
        Node, on_delete=models.PROTECT, related_name="access_grants", verbose_name=pgettext_lazy("staff", "node")
    )
    account = models.CharField(max_length=32, verbose_name=pgettext_lazy("staff", "account"))
    host = models.CharField(max_length=255, verbose_name=pgettext_lazy("staff", "host"))
    port = models.PositiveIntegerField(verbose_name=pgettext_lazy("staff", "port"))
    host_key_fingerprint = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "host key fingerprint"))
    ssh_key_fingerprint = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "SSH key fingerprint"))
    granted_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "granted at"))
    ends_at = models.DateTimeField(verbose_name=pgettext_lazy("staff", "ends at"))
    revoked_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "revoked at"))
    withdrawing_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text=pgettext_lazy("staff", "Given during a preparation that did not hand over: being removed."),
        verbose_name=pgettext_lazy("staff", "withdrawing since"),
    )
    reminders_sent = models.JSONField(
        default=list,
        blank=True,
        help_text=pgettext_lazy("staff", "Hours before the end already reminded."),
        verbose_name=pgettext_lazy("staff", "reminders sent"),
    )
    # After the rental's end: processes stopped and cards freed, the key limited to read-only SFTP until then
    # (DATA_GRACE_HOURS), and only then the clean end of rental. Empty: no window (yet).
    grace_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text=pgettext_lazy("staff", "Read-only SFTP allowed until then."),
        verbose_name=pgettext_lazy("staff", "grace until"),
    )

    objects = AccessGrantQuerySet.as_manager()

    class Meta:
        verbose_name = pgettext_lazy("staff", "access grant")
        verbose_name_plural = pgettext_lazy("staff", "access grants")
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

    order = models.OneToOneField(
        "orders.Order", on_delete=models.CASCADE, related_name="manifest", verbose_name=pgettext_lazy("staff", "order")
    )
    body = models.JSONField(verbose_name=pgettext_lazy("staff", "body"))
    signature = models.CharField(
        max_length=200,
        help_text=pgettext_lazy("staff", "Ed25519 over the canonical JSON, base64."),
        verbose_name=pgettext_lazy("staff", "signature"),
    )
    public_key = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "public key"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    # Earlier signed revisions, oldest first ({body, signature, public_key}): an extension signs a new one whose
    # body names the previous one's hash (`previous_body_sha256`).
    previous = models.JSONField(default=list, blank=True, verbose_name=pgettext_lazy("staff", "previous"))

    class Meta:
        verbose_name = pgettext_lazy("staff", "manifest")
        verbose_name_plural = pgettext_lazy("staff", "manifests")

    def __str__(self) -> str:
        return pgettext("staff", "manifest of %(order)s") % {"order": self.order_id}


class CheckKind(models.TextChoices):
    RECHECK = "recheck", pgettext_lazy("staff", "recheck (an operator's, the whole preflight)")
    PROBE = "probe", pgettext_lazy("staff", "probe (beat's daily, reachability and idle cards)")


class NodeCheck(models.Model):
    """A check of a node between rentals, without an order: an operator's recheck of a failed or maintenance
    node (the preflight a preparation runs; a pass returns it to sale) or beat's daily probe of an idle node
    (reachable with its pinned host key, no process on its cards; a failure sets it aside). No status table:
    open while `finished_at` is empty, then `passed` says how it ended; at most one is open per node."""

    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, related_name="checks", verbose_name=pgettext_lazy("staff", "node")
    )
    kind = models.CharField(max_length=10, choices=CheckKind.choices, verbose_name=pgettext_lazy("staff", "kind"))
    requested_by = models.CharField(
        max_length=150,
        help_text=pgettext_lazy("staff", "The operator, or system (beat's probe)."),
        verbose_name=pgettext_lazy("staff", "requested by"),
    )
    preparation = models.ForeignKey(
        "orders.Preparation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        help_text=pgettext_lazy("staff", "A recheck runs this preparation's setup step and preflight profile."),
        verbose_name=pgettext_lazy("staff", "preparation"),
    )
    step = models.CharField(
        max_length=40,
        blank=True,
        help_text=pgettext_lazy("staff", "What the check is doing now."),
        verbose_name=pgettext_lazy("staff", "step"),
    )
    progress = models.PositiveSmallIntegerField(
        default=0, help_text=pgettext_lazy("staff", "Percent."), verbose_name=pgettext_lazy("staff", "progress")
    )
    log = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "log"))
    # A worker lost mid-check: the job runs again, as the next attempt, and clears what the lost one left.
    attempt = models.PositiveSmallIntegerField(default=0, verbose_name=pgettext_lazy("staff", "attempt"))
    node_workdir = models.CharField(max_length=255, blank=True, verbose_name=pgettext_lazy("staff", "node workdir"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    started_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "started at"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "finished at"))
    passed = models.BooleanField(
        null=True,
        help_text=pgettext_lazy("staff", "Empty while the check runs."),
        verbose_name=pgettext_lazy("staff", "passed"),
    )
    reason = models.TextField(
        blank=True,
        help_text=pgettext_lazy("staff", "Why it failed, or what it found."),
        verbose_name=pgettext_lazy("staff", "reason"),
    )
    report = models.JSONField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "report"))
    report_sha256 = models.CharField(max_length=64, blank=True, verbose_name=pgettext_lazy("staff", "report SHA-256"))

    class Meta:
        verbose_name = pgettext_lazy("staff", "node check")
        verbose_name_plural = pgettext_lazy("staff", "node checks")
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

    @property
    def step_shown(self) -> str:
        return step_label(self.step)


class NodeHealth(models.Model):
    """One health probe of a rented node (every NODE_HEALTH_PROBE_MINUTES while access is live): reached over
    SSH with its pinned host key, read without loading the cards or reading the tenant's files. `findings` is
    the node tool's list of {check, status, detail}; `kernel_cursor` where its kernel log was read up to, so
    that the next probe reports only new XID errors. Pruned by age (NODE_HEALTH_KEEP_DAYS)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_probes")
    order = models.ForeignKey(
        "orders.Order", on_delete=models.SET_NULL, null=True, blank=True, related_name="health_probes"
    )
    checked_at = models.DateTimeField(default=timezone.now)
    reachable = models.BooleanField()
    healthy = models.BooleanField()
    findings = models.JSONField(default=list, blank=True)
    summary = models.TextField(blank=True, help_text="What is wrong, in words (empty when healthy).")
    kernel_cursor = models.CharField(max_length=100, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = pgettext_lazy("staff", "node health probe")
        verbose_name_plural = pgettext_lazy("staff", "node health probes")
        ordering = ["-checked_at", "-pk"]
        indexes = [models.Index(fields=["node", "-checked_at"], name="node_health_latest")]

    def __str__(self) -> str:
        return f"health of {self.node_id} at {self.checked_at:%Y-%m-%d %H:%M} ({'ok' if self.healthy else 'failing'})"


class DowntimeHold(models.Model):
    """A degraded episode whose every failing finding a tenant's own program could have caused (a slowdown under
    its load, an XID read from the kernel log, a node too loaded to answer): its downtime is not given back
    until a person decides (issue 39). One per episode; `decision` is written once, by provisioning.downtime."""

    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="downtime_holds")
    order = models.ForeignKey("orders.Order", on_delete=models.CASCADE, related_name="downtime_holds")
    down_from = models.DateTimeField()
    down_until = models.DateTimeField()
    causes = models.TextField(help_text="The failing findings of the episode's probes, in words.")
    created_at = models.DateTimeField(default=timezone.now)
    decision = models.CharField(
        max_length=16, blank=True, choices=[("", "undecided"), ("credited", "credited"), ("declined", "declined")]
    )
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    credit = models.ForeignKey(
        "orders.RentalCredit", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name = pgettext_lazy("staff", "downtime hold")
        verbose_name_plural = pgettext_lazy("staff", "downtime holds")
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["order", "node", "down_from"], name="one_downtime_hold_per_episode")
        ]

    def __str__(self) -> str:
        return f"downtime of {self.node_id} for {self.order_id} from {self.down_from:%Y-%m-%d %H:%M} ({self.decision})"


class MoveStatus(models.TextChoices):
    REQUESTED = "requested", pgettext_lazy("staff", "requested")
    # its preparation run: setup and the full preflight
    PREPARING = "preparing", pgettext_lazy("staff", "preparing the spare node")
    COPYING = "copying", pgettext_lazy("staff", "copying the tenant's data")
    HANDING_OVER = "handing_over", pgettext_lazy("staff", "handing over the new node")
    DONE = "done", pgettext_lazy("staff", "done")
    FAILED = "failed", pgettext_lazy("staff", "failed")
    NO_NODE = "no_node", pgettext_lazy("staff", "no spare node free")


# A move still under way: at most one per node (the moves' writer checks it), announced to its tenant.
OPEN_MOVES = (MoveStatus.REQUESTED, MoveStatus.PREPARING, MoveStatus.COPYING, MoveStatus.HANDING_OVER)


class NodeMove(models.Model):
    """An operator's move of a rental from a degraded or failed node to a spare one: the spare is prepared
    with the order's preparation and preflight (`run`), the tenant's home and scratch checkpoints are copied
    node to node when the old node answers (`copy_report`: what was and was not copied), the new access is
    handed over with a new manifest revision naming both nodes, then the old node gets the clean end of rental.
    One status table and one writer (provisioning.moves)."""

    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="node_moves")
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
        verbose_name = pgettext_lazy("staff", "node move")
        verbose_name_plural = pgettext_lazy("staff", "node moves")
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

    class Meta(TransitionEvent.Meta):
        verbose_name = pgettext_lazy("staff", "node move event")
        verbose_name_plural = pgettext_lazy("staff", "node move events")

    def __str__(self) -> str:
        return f"{self.move_id}: {self.get_from_status_display()} -> {self.get_to_status_display()}"
