"""`b200`, the order's command on its node (provisioning/node_tools/b200.py), run as a tenant runs it: a separate
process with its own HOME and order file. `trial` runs real scripts through torchrun on two gloo ranks, and no
process of a run may outlive it, whether the script finishes, crashes, hangs or never steps an optimizer."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from provisioning.node_tools import b200_verify

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).parent / "b200_scripts"
EXAMPLE = ROOT / "provisioning" / "node_tools" / "b200_example.py"
STATUS_KEYS = {
    "reference",
    "ends_at",
    "seconds_left",
    "data_until",
    "cards",
    "environment",
    "manifest_sha256",
    "notice",
}
TRIAL_KEYS = {
    "reference",
    "node",
    "manifest_sha256",
    "versions",
    "command",
    "git_commit",
    "runs",
    "scaling_efficiency",
    "verdicts",
}
RUN_KEYS = {
    "gpus",
    "status",
    "steps",
    "first_step_s",
    "step_s_median",
    "steps_per_s",
    "peak_memory_bytes",
    "memory_kind",
    "last_output",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def order(language: str = "en", ends_in: dt.timedelta = dt.timedelta(hours=2, minutes=5), **changes) -> dict:
    ends = dt.datetime.now(dt.UTC) + ends_in
    state = {
        "reference": "B2K-4MQ9XD",
        "node": "gpu-node-7",
        "language": language,
        "ends_at": ends.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "data_until": (ends + dt.timedelta(hours=48)).isoformat(timespec="seconds"),
        "cards": [
            {"index": 0, "name": "NVIDIA B200", "memory_gb": 180, "healthy": True},
            {"index": 1, "name": "NVIDIA B200", "memory_gb": 180, "healthy": True},
        ],
        "environment": {
            "python": "/opt/b200/venv/bin/python",
            "versions": {
                "driver": "570.124.06",
                "cuda": "12.8",
                "torch": "2.7.1",
                "nccl": "2.26.2",
                "python": "3.12.3",
            },
        },
        "manifest_sha256": "ab" * 32,
        "scratch": ["/scratch/o-b2k4mq9xd", "/tmp"],
    }
    return {**state, **changes}


def b200(tmp_path: Path, *args: str, state: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """The tool as the tenant runs it: HOME is tmp_path, the order file tmp_path/order.json (absent: no state)."""
    order_file = tmp_path / "order.json"
    if state is not None:
        order_file.write_text(json.dumps(state))
    env = {**os.environ, "HOME": str(tmp_path), "B200_ORDER_FILE": str(order_file), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "provisioning.node_tools.b200", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def processes_under(folder: Path) -> list[str]:
    """Live processes whose command line names something in folder (the run's script is copied there)."""
    needle = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if needle in cmdline:
            found.append(entry.name + ": " + cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def git_work_tree(folder: Path) -> str:
    """folder as a git work tree with one commit; the commit."""
    git = ["git", "-C", str(folder), "-c", "user.name=Researcher", "-c", "user.email=r@lab.example"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "the script"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def trial(
    tmp_path: Path, script: Path, *options: str, in_git: bool = False, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, dict]:
    """`b200 trial --device cpu` on a copy of script in tmp_path; the report it wrote; nothing of it left running."""
    copy = tmp_path / "work" / script.name
    copy.parent.mkdir()
    shutil.copy(script, copy)
    commit = git_work_tree(copy.parent) if in_git else None
    out = tmp_path / "trials"
    done = b200(
        tmp_path,
        *("trial", "--device", "cpu", "--python", sys.executable, "--steps", "8", "--warmup", "2"),
        *("--out", str(out), *options, "--", str(copy)),
        timeout=timeout,
    )
    reports = sorted(out.glob("*.json"))
    assert len(reports) == 1, done.stdout + done.stderr
    assert str(reports[0]) in done.stdout
    assert processes_under(tmp_path) == []
    report = json.loads(reports[0].read_text())
    assert report["git_commit"] == commit
    return done, report


# --- trial ---------------------------------------------------------------------------------------------------------


def test_the_example_steps_on_one_rank_then_two_and_the_report_holds_the_figures(tmp_path):
    done, report = trial(tmp_path, EXAMPLE, "--master-port", str(free_port()), in_git=True)

    assert done.returncode == 0, done.stdout + done.stderr
    assert set(report) == TRIAL_KEYS
    assert report["command"][:2] == ["b200", "trial"] and report["command"][-1].endswith("b200_example.py")
    assert report["reference"] is None and report["node"] == socket.gethostname()
    assert report["versions"]["torch"] == torch.__version__
    one, pair = report["runs"]
    for run, gpus in ((one, 1), (pair, 2)):
        assert set(run) >= RUN_KEYS
        assert (run["gpus"], run["status"], run["steps"], run["memory_kind"]) == (gpus, "ok", 8, "rss")
        assert len(run["peak_memory_bytes"]) == gpus and all(peak > 50 * 2**20 for peak in run["peak_memory_bytes"])
        assert run["step_s_median"] > 0 and run["first_step_s"] > 0 and run["steps_per_s"] > 0
        assert "made 8 optimizer steps" in run["last_output"]
    assert isinstance(report["scaling_efficiency"], float) and report["scaling_efficiency"] > 0
    assert report["verdicts"] and all(set(verdict) == {"code", "text"} for verdict in report["verdicts"])
    assert "unbalanced" not in {verdict["code"] for verdict in report["verdicts"]}
    assert not (tmp_path / "checkpoint.pt").exists()  # ended by the step counter, not by SIGTERM


def test_a_rank_holding_far_more_memory_than_the_other_is_an_unbalanced_split(tmp_path):
    done, report = trial(tmp_path, SCRIPTS / "unbalanced.py")

    assert done.returncode == 0, done.stdout + done.stderr
    pair = report["runs"][1]
    assert pair["peak_memory_bytes"][0] > 2 * pair["peak_memory_bytes"][1]
    unbalanced = [verdict for verdict in report["verdicts"] if verdict["code"] == "unbalanced"]
    assert len(unbalanced) == 1
    assert "rank 1 peaked at" in unbalanced[0]["text"] and "on rank 0" in unbalanced[0]["text"]


def test_a_script_that_crashes_on_both_ranks_is_failed_with_its_last_output(tmp_path):
    done, report = trial(tmp_path, SCRIPTS / "crash.py")

    assert done.returncode == 1
    for run in report["runs"]:
        assert (run["status"], run["steps"]) == ("failed", 1)
        assert "RuntimeError: deliberate crash on rank 0 after one step" in run["last_output"]
    assert "deliberate crash on rank 1" in report["runs"][1]["last_output"]
    assert report["scaling_efficiency"] is None
    assert [verdict["code"] for verdict in report["verdicts"]] == ["failed", "failed"]


def test_a_script_that_hangs_is_stopped_at_the_timeout(tmp_path):
    started = time.monotonic()
    done, report = trial(tmp_path, SCRIPTS / "hang.py", "--timeout", "20")

    assert done.returncode == 1
    assert [(run["status"], run["steps"]) for run in report["runs"]] == [("timeout", 0), ("timeout", 0)]
    assert "hang.py: sleeping until stopped" in report["runs"][1]["last_output"]
    assert "stopped at the timeout" in report["runs"][0]["last_output"]
    assert {verdict["code"] for verdict in report["verdicts"]} == {"timeout"}
    assert time.monotonic() - started < 2 * (20 + 10)


def test_a_script_that_never_steps_an_optimizer_is_reported_as_such(tmp_path):
    done, report = trial(tmp_path, SCRIPTS / "no_step.py")

    assert done.returncode == 1
    assert [(run["status"], run["steps"]) for run in report["runs"]] == [("no_steps", 0), ("no_steps", 0)]
    assert "no optimizer" in report["runs"][0]["last_output"]
    assert {verdict["code"] for verdict in report["verdicts"]} == {"no_steps"}


def test_a_trial_without_a_rental_needs_the_cpu_and_an_explicit_python(tmp_path):
    done = b200(tmp_path, "trial", "--", str(EXAMPLE))

    assert done.returncode == 2
    assert "no rental for this account" in done.stderr and "--device cpu --python" in done.stderr


def test_the_example_saves_its_checkpoint_when_asked_to_stop(tmp_path):
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--checkpoint", str(tmp_path / "checkpoint.pt")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert example.stdout is not None
        assert "training on cpu" in example.stdout.readline()
        assert example.stdout.readline().startswith("step 1 ")
        example.send_signal(signal.SIGTERM)
        assert example.wait(timeout=30) == 0
    finally:
        example.kill()
    saved = torch.load(tmp_path / "checkpoint.pt")
    assert saved["step"] >= 1 and set(saved) == {"model", "optimizer", "step"}


# --- status, env, welcome ----------------------------------------------------------------------------------------


def test_status_json_has_the_contract_keys_and_the_time_left_computed_now(tmp_path):
    done = b200(tmp_path, "status", "--json", state=order())

    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert set(status) == STATUS_KEYS
    assert 2 * 3600 + 4 * 60 < status["seconds_left"] <= 2 * 3600 + 5 * 60
    assert status["reference"] == "B2K-4MQ9XD" and status["cards"] == order()["cards"]
    assert status["environment"] == {key: order()["environment"][key] for key in ("python", "versions")}
    assert status["manifest_sha256"] == "ab" * 32 and status["notice"] is None


def test_an_end_already_past_leaves_no_negative_time(tmp_path):
    status = json.loads(b200(tmp_path, "status", "--json", state=order(ends_in=-dt.timedelta(hours=1))).stdout)

    assert status["seconds_left"] == 0


def test_status_shows_a_valid_notice(tmp_path):
    notice = {"ends_at": "2030-01-01T00:00:00Z", "reason": "maintenance", "seconds_left": 1800}
    (tmp_path / ".b200").mkdir()
    (tmp_path / ".b200" / "notice.json").write_text(json.dumps(notice))

    assert json.loads(b200(tmp_path, "status", "--json", state=order()).stdout)["notice"] == notice
    shown = b200(tmp_path, "status", state=order(language="fr")).stdout
    assert "Avis : une maintenance arrête ce nœud le 2030-01-01 00:00 UTC" in shown


def shadow_link(path: Path) -> None:
    path.symlink_to("/etc/shadow")


def ten_megabytes(path: Path) -> None:
    path.write_text('{"reason": "end", "pad": "' + "x" * 10_000_000 + '"}')


def invalid_json(path: Path) -> None:
    path.write_text('{"reason": "end", ')


def a_fifo(path: Path) -> None:
    os.mkfifo(path)  # a read would block forever


@pytest.mark.parametrize("plant", [shadow_link, ten_megabytes, invalid_json, a_fifo])
def test_a_hostile_notice_file_reads_as_no_notice(tmp_path, plant):
    (tmp_path / ".b200").mkdir()
    plant(tmp_path / ".b200" / "notice.json")

    done = b200(tmp_path, "status", "--json", state=order(), timeout=20)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["notice"] is None
    assert b200(tmp_path, "status", state=order(), timeout=20).returncode == 0


def test_status_in_the_order_language_names_each_fact_on_its_line(tmp_path):
    lines = b200(tmp_path, "status", state=order(language="es")).stdout.splitlines()

    assert lines[0] == "Pedido: B2K-4MQ9XD"
    assert lines[1].startswith("Fin: ") and lines[1].endswith("(2 h 4 min restante)")
    assert lines[3] == "Tarjetas: GPU 0 NVIDIA B200 180 GB, en buen estado; GPU 1 NVIDIA B200 180 GB, en buen estado"
    assert "Versiones: driver 570.124.06, CUDA 12.8, PyTorch 2.7.1, NCCL 2.26.2, Python 3.12.3" in lines


@pytest.mark.parametrize(
    ("language", "phrases"),
    [
        (
            "es",
            ["Bienvenido a su nodo B200: Pedido B2K-4MQ9XD", "Tarjetas:", "Python validado:", "Carpetas de trabajo:"],
        ),
        ("fr", ["Bienvenue sur votre nœud B200 : Commande B2K-4MQ9XD", "Cartes :", "Python validé :", "Aide : b200"]),
    ],
)
def test_the_welcome_speaks_the_order_language(tmp_path, language, phrases):
    done = b200(tmp_path, "welcome", state=order(language=language))

    assert done.returncode == 0, done.stderr
    for phrase in [*phrases, "/scratch/o-b2k4mq9xd, /tmp", "PyTorch 2.7.1, NCCL 2.26.2", "/opt/b200/venv/bin"]:
        assert phrase in done.stdout


def test_the_welcome_says_nothing_on_an_account_without_a_rental(tmp_path):
    done = b200(tmp_path, "welcome")

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_env_prints_the_line_that_activates_the_validated_python(tmp_path):
    assert b200(tmp_path, "env", state=order()).stdout == "export PATH=/opt/b200/venv/bin:$PATH\n"
    given = order(environment={"python": "/opt/x/bin/python", "activate": "source /opt/x/bin/activate"})
    assert b200(tmp_path, "env", state=given).stdout == "source /opt/x/bin/activate\n"


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["env"]])
def test_an_account_without_a_rental_is_told_so(tmp_path, command):
    done = b200(tmp_path, *command)

    assert done.returncode == 2
    assert done.stdout == "" and "no rental for this account on this node" in done.stderr


# --- verify --------------------------------------------------------------------------------------------------------


def test_verify_compares_the_quick_preflight_with_the_hand_over_figures(tmp_path):
    figures = {"allreduce.bytes": 16 * 2**20, "allreduce.world_size": 3, "nvlink.active_links": 18}
    state = order(environment={"python": sys.executable}, report=figures)

    done = b200(tmp_path, "verify", "--device", "cpu", "--out", str(tmp_path / "out"), state=state, timeout=180)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "loads 2 cpu card(s)" in done.stdout
    assert "allreduce.world_size: hand-over 3, now 2 (33% away): OUT OF RANGE" in done.stdout
    assert "nvlink.active_links: hand-over 18, now not measured: OUT OF RANGE" in done.stdout
    result = json.loads(next((tmp_path / "out").glob("verify-*.json")).read_text())
    assert result["preflight_ok"] is True and result["preflight"]["order_reference"] == "B2K-4MQ9XD"
    assert [(figure["name"], figure["ok"]) for figure in result["figures"]] == [
        ("allreduce.bytes", True),
        ("allreduce.world_size", False),
        ("nvlink.active_links", False),
    ]


def test_the_hand_over_preflight_report_gives_its_performance_figures_to_compare():
    handed_over = {
        "duration_s": 812.5,
        "checks": [
            {"name": "allreduce", "status": "pass", "metrics": {"bytes": 2**33, "busbw_gbps": 655.2, "ranks": []}},
            {"name": "step_time", "status": "pass", "metrics": {"steady_median_s": 1.92, "first_step_s": 31.0}},
            {"name": "checkpoint_write", "status": "skip", "metrics": {"duration_s": 0.0}},
        ],
    }

    figures = b200_verify.handover_figures(handed_over)

    assert figures == {"allreduce.busbw_gbps": 655.2, "step_time.steady_median_s": 1.92}
    assert b200_verify.handover_figures({"allreduce.busbw_gbps": 600}) == {"allreduce.busbw_gbps": 600}
    compared = b200_verify.compare(figures, {"allreduce.busbw_gbps": 580.0, "step_time.steady_median_s": 1.95})
    assert [(figure["name"], figure["ok"]) for figure in compared] == [
        ("allreduce.busbw_gbps", False),
        ("step_time.steady_median_s", True),
    ]
