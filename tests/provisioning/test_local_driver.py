"""The local (development) driver keeps the same contract as the ssh driver, on this machine."""

from __future__ import annotations

import os
import time

import pytest

from provisioning.drivers import CommandTimeout, DriverError, driver_for, public_key_fingerprint
from provisioning.drivers.local import LocalDriver
from provisioning.models import Node


@pytest.fixture
def local():
    with driver_for(Node(name="dev-1", driver="local")) as driver:
        yield driver


def test_a_command_returns_its_exit_code_stdout_and_stderr(local):
    result = local.run(["sh", "-c", "echo out; echo err >&2; exit 4"], timeout=30)

    assert (result.exit_code, result.stdout, result.stderr) == (4, "out\n", "err\n")


def test_arguments_are_never_interpreted_by_a_shell(local):
    tricky = ["two words", "$(touch pwned)", "; ls", "*"]

    assert local.run(["printf", "%s\\n", *tricky], timeout=30).stdout.splitlines() == tricky
    assert not os.path.exists(os.path.join(local.workdir, "pwned"))


def test_commands_run_in_the_workdir_with_the_given_environment(local):
    result = local.run(["sh", "-c", 'pwd; echo "$ORDER_REF"'], timeout=30, env={"ORDER_REF": "B2K"})

    assert result.stdout == f"{os.path.realpath(local.workdir)}\nB2K\n"


def test_a_missing_program_is_exit_127(local):
    assert local.run(["no-such-program-b200"], timeout=30).exit_code == 127


def test_files_round_trip_with_their_mode(local):
    local.put_file(b"\x00\xffpayload", "nested/dir/file.bin", mode=0o600)

    assert local.get_file("nested/dir/file.bin") == b"\x00\xffpayload"
    assert os.stat(os.path.join(local.workdir, "nested/dir/file.bin")).st_mode & 0o777 == 0o600
    with pytest.raises(DriverError, match="could not read"):
        local.get_file("missing.json")


def test_a_command_past_its_timeout_is_killed_with_its_process_group(local):
    started = time.monotonic()

    with pytest.raises(CommandTimeout):
        local.run(["sh", "-c", "sleep 300 & echo $! > child.pid; wait"], timeout=1)

    assert time.monotonic() - started < 5
    child = local.get_file("child.pid").decode().strip()
    time.sleep(0.2)
    assert not running(child)


def running(pid: str) -> bool:
    """Alive, not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


def test_the_fingerprint_is_the_pinned_keys_or_local(ssh_public_key):
    with LocalDriver() as driver:
        assert driver.host_key_fingerprint() == "local"
    with driver_for(Node(name="dev-2", driver="local", host_key=ssh_public_key)) as driver:
        assert driver.host_key_fingerprint() == public_key_fingerprint(ssh_public_key)


def test_closing_removes_the_workdir():
    driver = LocalDriver()
    driver.put_file(b"x", "a.txt")

    driver.close()

    assert not os.path.exists(driver.workdir)


def test_an_unknown_driver_is_refused():
    with pytest.raises(DriverError, match="unknown driver"):
        driver_for(Node(name="dev-3", driver="telnet"))
