"""One node's preparation as a declared list of steps, each with its share of the progress bar and the way
it fails: connect, clear what a lost attempt left, upload, check that sshd reads only root-held key files, set up,
run the preflight, read its report, grant, and prove as the order's account that a login, SFTP and SCP work
(provisioning.handover_proof), so that the rental clock never starts on a node its customer cannot use.
An operator's recheck of a node (provisioning.node_checks) runs the same steps but the grant and its proof, without an
order.

A step returns a line for the run's log ("" for none) or raises `Stop` with the run's outcome. Driver errors
(unreachable, wrong host key) and a refused key propagate to `prepare._execute`, which maps them too.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings

from fleet.models import Node
from provisioning.access import access_grant_on_node, access_tool_check, account_name, sshd_keys_problem
from provisioning.bundle import node_bundle
from provisioning.drivers.base import CommandResult, CommandTimeout, Driver, DriverError
from provisioning.handover_proof import handover_login_proof
from provisioning.models import AccessGrant, NodeCheck, PreparationRun, RunStatus
from provisioning.preflight.cli import command_line

if TYPE_CHECKING:
    from orders.models import Preparation

# A driver's scratch directory (ssh: mktemp's b200-node.XXXXXXXXXX, local: b200-node-XXXXXXXX).
WORKDIR = re.compile(r"/[\w./-]*/b200-node[.-]\w+")
# Kills what a lost attempt left running in its scratch directory on the node, then removes the directory.
CLEAR_LOST_ATTEMPT = """
for p in /proc/[0-9]*; do
  case "$(readlink "$p/cwd" 2>/dev/null)" in "$1"|"$1"/*) kill -KILL "${p#/proc/}" 2>/dev/null;; esac
done
rm -rf -- "$1"
"""


class Stop(Exception):
    """The run ends here with this outcome."""

    def __init__(self, status: str, error: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.report = status, error, report


@dataclass
class NodeJob:
    """What the steps share: the run (or a recheck's NodeCheck, which has no order), its connection to the node,
    and what earlier steps produced."""

    run: PreparationRun | NodeCheck
    driver: Driver
    lost_workdir: str = ""
    limit: int = field(default_factory=lambda: settings.PREFLIGHT_TIMEOUT_SECONDS)
    preflight: CommandResult | None = None
    report: dict[str, Any] | None = None
    grant: AccessGrant | None = None

    @property
    def node(self) -> Node:
        return self.run.node

    @property
    def work(self) -> str:
        return self.driver.workdir

    @property
    def preparation(self) -> Preparation | None:
        """Whose setup step and profile run: the order's, or the one a recheck names (none: the defaults)."""
        return self.run.order.preparation if isinstance(self.run, PreparationRun) else self.run.preparation

    @property
    def order_reference(self) -> str | None:
        return self.run.order.reference if isinstance(self.run, PreparationRun) else None


@dataclass(frozen=True)
class Step:
    progress: str  # what the order page and the console show while it runs
    percent: int
    run: Callable[[NodeJob], str]


def progress_write(run: PreparationRun | NodeCheck, step: str, percent: int, line: str = "") -> None:
    run.step, run.progress = step, percent
    if line:
        run.log = (run.log + line.rstrip() + "\n")[-20_000:]
    # Only the attempt that holds the run writes to it.
    type(run).objects.filter(pk=run.pk, attempt=run.attempt).update(step=step, progress=percent, log=run.log)


def connect(job: NodeJob) -> str:
    line = f"connected to {job.node.name}, host key {job.driver.host_key_fingerprint()}"
    progress_write(job.run, "copying the preflight", 10, line)
    access_tool_check(driver=job.driver, node=job.node)  # an outdated installed tool stops the run before the preflight
    return ""


def clear_lost_attempt(job: NodeJob) -> str:
    """Kill what a lost attempt left running on the node (a preflight holding the cards) and remove its files."""
    workdir = job.lost_workdir
    if not workdir:
        return ""
    if not WORKDIR.fullmatch(workdir) or ".." in workdir:
        return f"left {workdir!r} alone: not a scratch directory"
    result = job.driver.run(["sh", "-c", CLEAR_LOST_ATTEMPT, "sh", workdir], timeout=60)
    return f"cleared the lost attempt's {workdir} (exit {result.exit_code})"


def preflight_profile(node: Node, preparation: Preparation | None) -> tuple[dict[str, Any], str | None]:
    """The preparation's profile with the node's own thresholds, and the architecture it promises (cuda only)."""
    profile = {**((preparation.preflight_profile if preparation else None) or {})}
    # The architecture the preparation promises (sm_100 for B200): a CPU development node can't have it.
    expect_arch = profile.pop("expect_arch", None)
    if node.thresholds:
        profile["thresholds"] = {**profile.get("thresholds", {}), **node.thresholds}
    return profile, expect_arch if node.preflight_device == "cuda" else None


def upload(job: NodeJob) -> str:
    profile, _ = preflight_profile(job.node, job.preparation)
    job.driver.put_file(node_bundle(), f"{job.work}/bundle.tar.gz")
    job.driver.put_file(json.dumps(profile).encode(), f"{job.work}/profile.json")
    result = job.driver.run(["tar", "-xzf", f"{job.work}/bundle.tar.gz", "-C", job.work], timeout=60)
    if result.exit_code != 0:
        raise Stop(RunStatus.ERROR, f"unpacking the preflight failed: {result.stderr[-500:]}")
    return ""


# The account a recheck asks sshd about (no order, no account): a name no order gets (theirs are o-<reference>).
SSHD_CHECK_ACCOUNT = "o-sshd-check"


def sshd_keys(job: NodeJob) -> str:
    """No rental on a node whose sshd lets the tenant add keys (issue 39): a key in its home would outlive a rekey
    and open a shell in the data window."""
    run = job.run
    account = account_name(run.order) if isinstance(run, PreparationRun) else SSHD_CHECK_ACCOUNT
    problem = sshd_keys_problem(driver=job.driver, node=job.node, account=account)
    if problem:
        raise Stop(RunStatus.FAILED, problem)
    return ""


def setup_command(node: Node, script: str) -> list[str]:
    """The setup step knows which Python and device the preflight will use (what it must prepare for)."""
    return ["env", f"PREFLIGHT_PYTHON={node.python}", f"PREFLIGHT_DEVICE={node.preflight_device}", "bash", script]


def setup(job: NodeJob) -> str:
    script = job.preparation.setup_script if job.preparation else ""
    if not script.strip():
        return ""
    job.driver.put_file(script.encode(), f"{job.work}/setup.sh", mode=0o700)
    try:
        result = job.driver.run(setup_command(job.node, f"{job.work}/setup.sh"), timeout=job.limit)
    except CommandTimeout as exc:
        raise Stop(RunStatus.ERROR, over_time_limit("the setup step", job.limit)) from exc
    progress_write(job.run, "setting up the environment", 30, result.stdout[-2000:] + result.stderr[-2000:])
    if result.exit_code != 0:
        raise Stop(RunStatus.FAILED, f"the setup step exited with {result.exit_code}: {result.stderr[-500:]}")
    return ""


def preflight(job: NodeJob) -> str:
    _, expect_arch = preflight_profile(job.node, job.preparation)
    argv = command_line(
        python=job.node.python,
        device=job.node.preflight_device,
        world_size=job.node.gpu_count,
        report=f"{job.work}/report.json",
        order=job.order_reference,
        profile=f"{job.work}/profile.json",
        expect_arch=expect_arch,
    )
    try:
        job.preflight = job.driver.run(
            ["sh", "-c", f"cd {shlex.quote(job.work)} && exec {shlex.join(argv)}"], timeout=job.limit
        )
    except CommandTimeout as exc:
        progress_write(job.run, "stopped", 85, exc.stdout[-4000:] + exc.stderr[-2000:])
        raise Stop(RunStatus.ERROR, over_time_limit("the preflight", job.limit)) from exc
    return ""


def read_report(job: NodeJob) -> str:
    result = job.preflight
    assert result is not None, "read_report runs after run_preflight (STEPS)"
    progress_write(job.run, "reading the report", 85, result.stdout[-4000:] + result.stderr[-2000:])
    if result.exit_code == -1:  # no exit status: the connection or the node went away, or a signal killed it
        raise Stop(
            RunStatus.ERROR, f"the preflight on {job.node.name} ended without an exit status: {gone(job.driver)}"
        )
    if result.exit_code == 2:
        raise Stop(RunStatus.ERROR, f"the preflight refused its arguments: {result.stderr[-500:]}")
    try:
        job.report = json.loads(job.driver.get_file(f"{job.work}/report.json"))
    except (DriverError, ValueError) as exc:
        raise Stop(
            RunStatus.ERROR, f"no preflight report ({exc}); exit {result.exit_code}: {result.stderr[-500:]}"
        ) from exc
    if not job.report.get("ok") or result.exit_code != 0:
        failed = [c for c in job.report.get("checks", []) if c.get("status") == "fail"]
        summary = "; ".join(f"{c['name']}: {c.get('detail', '')}" for c in failed) or f"exit {result.exit_code}"
        raise Stop(RunStatus.FAILED, f"the preflight failed: {summary}"[:2000], job.report)
    return ""


def grant(job: NodeJob) -> str:
    if not isinstance(job.run, PreparationRun):
        raise Stop(RunStatus.ERROR, "a recheck grants no access")
    job.grant = access_grant_on_node(driver=job.driver, run=job.run)
    return ""


def login_proof(job: NodeJob) -> str:
    """No rental on a node its customer cannot use (issue 41): as the order's account, with a key made for this one
    proof, a login, SFTP and SCP work (rsync too where the node has it) before the clock starts."""
    if job.grant is None:
        raise Stop(RunStatus.ERROR, "no access was granted on the node: nothing to prove")
    proven: list[str] = []
    problem = handover_login_proof(driver=job.driver, node=job.node, grant=job.grant, said=proven.append)
    if problem:
        raise Stop(RunStatus.FAILED, problem)
    return "; ".join(proven)


STEPS = (
    Step("copying the preflight", 10, connect),
    Step("copying the preflight", 10, clear_lost_attempt),
    Step("copying the preflight", 10, upload),
    Step("copying the preflight", 10, sshd_keys),
    Step("setting up the environment", 20, setup),
    Step("running the GPU preflight", 40, preflight),
    Step("reading the report", 85, read_report),
    Step("granting access", 92, grant),
    # The access handed over, proven as the customer will use it; shown as part of the grant (its words, like every
    # step's, are translated in provisioning.models.STEP_LABELS).
    Step("proving the login", 95, login_proof),
)


# A recheck between rentals: everything but the grant and its proof (no order, no account, no tenant key).
RECHECK_STEPS = tuple(step for step in STEPS if step.run not in (grant, login_proof))


def steps_run(job: NodeJob, steps: tuple[Step, ...] = STEPS) -> tuple[str, dict[str, Any] | None, str]:
    """Every step in order: (status, report, error). A step that stops the run gives its outcome."""
    try:
        for step in steps:
            progress_write(job.run, step.progress, step.percent)
            line = step.run(job)
            if line:
                progress_write(job.run, step.progress, step.percent, line)
    except Stop as stop:
        return stop.status, stop.report, stop.error
    return RunStatus.PASSED, job.report, ""


def over_time_limit(what: str, seconds: int) -> str:
    return (
        f"{what} exceeded its time limit of {seconds} s (PREFLIGHT_TIMEOUT_SECONDS) and was killed on the node, "
        "with every process it started"
    )


def gone(driver: Driver) -> str:
    try:
        driver.run(["true"], timeout=10)
    except DriverError as exc:
        return f"the node cannot be reached any more ({exc})"
    return "the node is reachable; a signal killed it there"
