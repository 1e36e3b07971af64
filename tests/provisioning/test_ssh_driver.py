"""The ssh driver against a real sshd: commands, files, timeouts, and the pinned host key."""

from __future__ import annotations

import subprocess
import time

import pytest

from provisioning.drivers import CommandTimeout, DriverError, HostKeyMismatch, driver_for
from provisioning.drivers.ssh import SSHDriver, operator_key_file
from tests.servers import free_port


def test_a_command_returns_its_exit_code_stdout_and_stderr(operator_driver):
    result = operator_driver.run(["sh", "-c", "id -un; echo oops >&2; exit 3"], timeout=30)

    assert (result.exit_code, result.stdout, result.stderr) == (3, "root\n", "oops\n")


def test_arguments_reach_the_command_verbatim_never_through_a_shell(operator_driver):
    tricky = ["two words", "it's", '"quoted"', "$(touch pwned)", "; rm -rf /", "`id`", "*", "ünïcode"]

    result = operator_driver.run(["printf", "%s\\n", *tricky], timeout=30)

    assert result.stdout.splitlines() == tricky
    assert operator_driver.run(["test", "-e", "pwned"], timeout=30).exit_code == 1


def test_a_missing_program_is_exit_127(operator_driver):
    assert operator_driver.run(["no-such-program-b200"], timeout=30).exit_code == 127


def test_commands_run_in_the_workdir_with_the_given_environment(operator_driver):
    result = operator_driver.run(["sh", "-c", 'pwd; echo "$ORDER_REF"'], timeout=30, env={"ORDER_REF": "B2K 4MQ"})

    assert result.stdout == f"{operator_driver.workdir}\nB2K 4MQ\n"


def test_a_file_put_on_the_node_comes_back_byte_for_byte_with_its_mode(operator_driver):
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value

    operator_driver.put_file(data, "reports/run-1/report.bin", mode=0o600)

    assert operator_driver.get_file("reports/run-1/report.bin") == data
    listing = operator_driver.run(["stat", "-c", "%a %s", "reports/run-1/report.bin"], timeout=30)
    assert listing.stdout.split() == ["600", str(len(data))]


def test_reading_a_missing_file_is_a_driver_error(operator_driver):
    with pytest.raises(DriverError, match="could not read"):
        operator_driver.get_file("no-such-report.json")


def test_a_command_past_its_timeout_is_killed_with_what_it_started(operator_driver):
    started = time.monotonic()

    with pytest.raises(CommandTimeout, match="timeout"):
        operator_driver.run(["sh", "-c", "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; wait"], timeout=1)

    assert time.monotonic() - started < 10
    pids = [operator_driver.get_file(name).decode().strip() for name in ("shell.pid", "child.pid")]
    alive = "for p in {0} {1}; do grep -qs '^State:.*[^Z] ' /proc/$p/status && echo $p; done; true"
    assert operator_driver.run(["sh", "-c", alive.format(*pids)], timeout=30).stdout == ""


def test_a_wrong_pinned_host_key_is_refused_before_anything_is_sent(sshd, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True)
    other_key = (tmp_path / "impostor.pub").read_text()
    logins_before = sshd.accepted_logins()

    with pytest.raises(HostKeyMismatch, match="not the pinned"):
        driver_for(sshd.node(host_key=other_key), key_file=str(sshd.operator_key_file))

    time.sleep(0.2)
    assert sshd.accepted_logins() == logins_before


def test_a_pinned_key_of_a_type_the_node_lacks_is_refused(sshd, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(tmp_path / "ecdsa")], check=True)

    with pytest.raises(HostKeyMismatch, match="no ecdsa-sha2-nistp256 host key"):
        driver_for(sshd.node(host_key=(tmp_path / "ecdsa.pub").read_text()), key_file=str(sshd.operator_key_file))


@pytest.mark.parametrize("pinned", ["", "   ", "not a key", "ssh-ed25519 bm90IGEga2V5"])
def test_a_node_without_a_valid_pinned_key_is_refused(sshd, pinned):
    with pytest.raises(HostKeyMismatch, match="no valid pinned host key"):
        driver_for(sshd.node(host_key=pinned), key_file=str(sshd.operator_key_file))


def test_the_fingerprint_is_the_one_ssh_keygen_prints(operator_driver, sshd):
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(sshd.host_key_file.with_suffix(".pub"))], capture_output=True, text=True, check=True
    ).stdout

    assert operator_driver.host_key_fingerprint() == printed.split()[1]


def test_a_key_the_node_does_not_know_is_refused(sshd, make_ssh_key):
    stranger = make_ssh_key("stranger@elsewhere")

    with pytest.raises(DriverError, match="refused the key"):
        driver_for(sshd.node(), key_file=str(stranger.private))


def test_the_operator_key_comes_from_node_ssh_key_file(sshd, monkeypatch):
    monkeypatch.setenv("NODE_SSH_KEY_FILE", str(sshd.operator_key_file))
    assert operator_key_file() == str(sshd.operator_key_file)
    with driver_for(sshd.node()) as driver:
        assert driver.run(["id", "-un"], timeout=30).stdout == "root\n"

    monkeypatch.delenv("NODE_SSH_KEY_FILE")
    with pytest.raises(DriverError, match="NODE_SSH_KEY_FILE is not set"):
        driver_for(sshd.node())


def test_an_unreachable_node_is_a_driver_error_within_the_connect_timeout(sshd):
    started = time.monotonic()

    with pytest.raises(DriverError, match="cannot connect"):
        driver_for(sshd.node(port=free_port()), connect_timeout=3, key_file=str(sshd.operator_key_file))

    assert time.monotonic() - started < 5


def test_closing_the_driver_removes_its_workdir(sshd):
    with SSHDriver(host=sshd.host, port=sshd.port, host_key=sshd.host_key, key_file=str(sshd.operator_key_file)) as d:
        workdir = d.workdir
        d.put_file(b"scratch", "left-behind.txt")

    with driver_for(sshd.node(), key_file=str(sshd.operator_key_file)) as other:
        assert other.workdir != workdir
        assert other.run(["test", "-e", workdir], timeout=30).exit_code == 1
