"""The end of a rental as a researcher's training loop lives it (issue 41), with access.py on the sandboxed node:
a notice before the end (~/.b200/notice.json and a line on the tenant's open terminal), written without
following anything the tenant planted in its home, then SIGTERM and, after the grace, SIGKILL: a loop that saves
a checkpoint on SIGTERM keeps it into the data window, and one that ignores SIGTERM is gone after the grace."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time

import paramiko
import pytest

from tests.provisioning.conftest import login
from tests.provisioning.test_end_of_rental import processes_of, uid_of

# The training loop of the docs (provisioning/node_tools/b200_example.py does the same with torch.save): on
# SIGTERM it saves its checkpoint and leaves.
SAVES_ON_SIGTERM = r"""
import signal, sys, time
def save(*_):
    with open("checkpoint.pt", "w") as handle:
        handle.write("step 4242\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
while True:
    time.sleep(0.1)
"""
IGNORES_SIGTERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.1)\n"


def in_minutes(minutes: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(minutes=minutes)


def interactive_shell(sshd, account: str, key) -> tuple[paramiko.SSHClient, paramiko.Channel]:
    """The tenant's terminal: an interactive login with a pty, as `ssh` opens one."""
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    key_type, key_data = sshd.host_key.split()[:2]
    host_key = paramiko.PKey.from_type_string(key_type, base64.b64decode(key_data))
    client.get_host_keys().add(f"[{sshd.host}]:{sshd.port}", key_type, host_key)
    client.connect(sshd.host, port=sshd.port, username=account, key_filename=str(key.private), allow_agent=False,
                   look_for_keys=False, timeout=20)  # fmt: skip
    channel = client.invoke_shell()
    channel.settimeout(10)
    return client, channel


def read_until(channel: paramiko.Channel, words: str, seconds: float = 10) -> str:
    seen = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and words.encode() not in seen:
        if channel.recv_ready():
            seen += channel.recv(4096)
        else:
            time.sleep(0.05)
    return seen.decode(errors="replace")


def test_the_notice_reaches_the_file_and_the_tenants_open_terminal(access, sshd, account, make_ssh_key):
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    client, channel = interactive_shell(sshd, account, key)
    try:
        # Given the tenant's terminal open
        channel.send(b"echo ready\n")
        read_until(channel, "ready")

        # When the node gives the notice 30 minutes before the end
        ends = in_minutes(30)
        told = access("notice", "--account", account, "--ends-at", ends.isoformat(), "--reason", "end",
                      "--grace-seconds", "120")  # fmt: skip

        # Then the terminal shows it, and ~/.b200/notice.json holds the contract's keys, owned by the tenant
        assert told.exit_code == 0, told.stderr
        assert json.loads(told.stdout)["terminals"] >= 1
        shown = read_until(channel, "b200 status")
        assert "B200 Pairs: this rental ends at" in shown and "SIGKILL 120 s later" in shown
    finally:
        client.close()
    path = sshd.home(account) / ".b200" / "notice.json"
    body = json.loads(path.read_text())
    assert body["ends_at"] == ends.strftime("%Y-%m-%dT%H:%M:%SZ") and body["reason"] == "end"
    assert 1790 <= body["seconds_left"] <= 1800
    assert path.stat().st_uid == uid_of(sshd, account)


def test_a_notice_never_writes_through_what_the_tenant_planted(access, sshd, account, make_ssh_key, tmp_path):
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    trap = tmp_path / "trap"
    trap.mkdir(mode=0o777)
    (trap / "notice.json").write_text("untouched\n")
    trap.chmod(0o777)
    # Given ~/.b200 as a link to a folder elsewhere, then ~/.b200/notice.json as a link to a file elsewhere
    for plant in (f"ln -s {trap} ~/.b200", f"mkdir ~/.b200 && ln -s {trap}/notice.json ~/.b200/notice.json"):
        with login(sshd, account, key) as session:
            assert session.run(["sh", "-c", f"rm -rf ~/.b200 && {plant}"], timeout=30).exit_code == 0

        # When the notice is given
        result = access("notice", "--account", account, "--ends-at", in_minutes(30).isoformat(), "--reason", "move")

        # Then it is in the home, a real file in a real folder, and the linked file is untouched
        assert result.exit_code == 0, result.stderr
        folder = sshd.home(account) / ".b200"
        assert folder.is_dir() and not folder.is_symlink()
        assert json.loads((folder / "notice.json").read_text())["reason"] == "move"
        assert (trap / "notice.json").read_text() == "untouched\n"


@pytest.mark.parametrize("term_seconds", [3])
def test_at_the_end_a_loop_that_saves_on_sigterm_keeps_its_checkpoint_and_one_that_ignores_it_is_killed(
    access, sshd, account, make_ssh_key, term_seconds
):
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    uid = uid_of(sshd, account)
    # Given the tenant's training loop (saves on SIGTERM) and a stubborn process (ignores it), both detached
    with login(sshd, account, key) as session:
        session.put_file(SAVES_ON_SIGTERM.encode(), f"/home/{account}/train.py")
        session.put_file(IGNORES_SIGTERM.encode(), f"/home/{account}/stubborn.py")
        started = session.run(["sh", "-c", "cd ~ && for f in train.py stubborn.py; do "
                               "setsid python3 $f </dev/null >/dev/null 2>&1 & done; sleep 1"], timeout=30)  # fmt: skip
    assert started.exit_code == 0, started.stderr
    assert len(processes_of(uid)) >= 2

    # When the rental ends and the data window opens, with a grace of a few seconds
    began = time.monotonic()
    ended = access("grace", "--account", account, "--until", in_minutes(600).isoformat(),
                   "--term-seconds", str(term_seconds))  # fmt: skip
    took = time.monotonic() - began

    # Then the loop saved its checkpoint (kept for the window), the stubborn one was killed after the grace,
    # and nothing of the tenant runs
    assert ended.exit_code == 0, ended.stderr
    report = json.loads(ended.stdout)
    assert report["processes_terminated"] >= 2 and report["processes_killed"] >= 1
    assert (sshd.home(account) / "checkpoint.pt").read_text() == "step 4242\n"
    assert processes_of(uid) == []
    assert took >= term_seconds
