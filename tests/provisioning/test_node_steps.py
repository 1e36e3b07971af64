"""The preparation's steps on a node are a declared list, and the preflight's command line is one its parser takes."""

from __future__ import annotations

from provisioning import node_steps
from provisioning.models import STEP_LABELS
from provisioning.preflight.cli import command_line, parser


def test_the_steps_run_in_the_order_a_node_needs_them_with_a_rising_progress_bar():
    names = [step.run.__name__ for step in node_steps.STEPS]
    assert names == [
        "connect", "clear_lost_attempt", "upload", "sshd_keys", "setup", "preflight", "read_report", "grant",
        "login_proof",
    ]  # fmt: skip
    percents = [step.percent for step in node_steps.STEPS]
    assert percents == sorted(percents) and percents[-1] < 100  # 100 is written with the outcome


def test_every_step_a_run_shows_has_words_in_the_staffs_language():
    # The row keeps the step's English words; the console and the run's page show STEP_LABELS' translation
    assert {step.progress for step in node_steps.STEPS} <= set(STEP_LABELS)


def test_the_preflight_command_a_preparation_builds_is_accepted_by_the_preflights_own_parser():
    argv = command_line(
        python="python3",
        device="cuda",
        world_size=2,
        report="/tmp/w/report.json",
        order="ORD-1",
        profile="/tmp/w/profile.json",
        expect_arch="sm_100",
    )
    assert argv[:3] == ["python3", "-m", "provisioning.preflight"]
    args = parser().parse_args(argv[3:])
    assert (args.device, args.world_size, args.order, args.expect_arch) == ("cuda", 2, "ORD-1", "sm_100")
    assert str(args.json) == "/tmp/w/report.json" and str(args.profile) == "/tmp/w/profile.json"
    cpu = command_line(python="py", device="cpu", world_size=2, report="r", order="O", profile="p", expect_arch=None)
    assert "--expect-arch" not in cpu and parser().parse_args(cpu[3:]).expect_arch is None


def test_a_recheck_runs_every_step_but_the_grant_and_its_proof_and_its_preflight_names_no_order():
    assert [step.run.__name__ for step in node_steps.RECHECK_STEPS] == [
        "connect",
        "clear_lost_attempt",
        "upload",
        "sshd_keys",
        "setup",
        "preflight",
        "read_report",
    ]
    argv = command_line(python="py", device="cpu", world_size=2, report="r", order=None, profile="p", expect_arch=None)
    assert "--order" not in argv and parser().parse_args(argv[3:]).order is None
