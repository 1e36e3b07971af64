"""The access tool's `grace` on the sandboxed node: the key limited to read-only SFTP with the window's end, the
login shell one that reads no startup file, the crontab moved aside, idempotent; a grant again (an extension in
the window) gives the whole login back; an account that is not the tool's is refused; no sftp-server, no window."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from provisioning.drivers.base import DriverError
from provisioning.node_tools import access as tool
from tests.provisioning.conftest import login
from tests.provisioning.flow.test_data_grace import ssh_command
from tests.provisioning.test_access_tool import running

UNTIL = dt.datetime(2031, 1, 1, 12, 0, tzinfo=dt.UTC)


def keys_line(sshd, account: str) -> str:
    return sshd.held_key(account).read_text()


def test_grace_limits_the_key_to_read_only_sftp_holds_the_crontab_and_a_grant_again_gives_the_login_back(
    access, sshd, account, make_ssh_key
):
    # Given an account with a crontab (as cron keeps it: a file named after the account)
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    spool = sshd.sandbox / "var" / "spool" / "cron" / "crontabs"
    spool.mkdir(parents=True, exist_ok=True)
    (spool / account).write_text("* * * * * python train.py\n")

    # When the data window opens, twice
    first = access("grace", "--account", account, "--until", UNTIL.isoformat())
    again = access("grace", "--account", account, "--until", UNTIL.isoformat())

    # Then the key reads over SFTP only until the window's end, the shell reads no file of the tenant's, the
    # crontab no longer runs, and the second call changed nothing
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["changed"] is True and report["jobs_held"] == [f"cron /var/spool/cron/crontabs/{account}"]
    server = report["sftp_server"]
    line = keys_line(sshd, account)
    assert line.startswith(f'restrict,command="{server} -R",expiry-time="203101011200Z" ssh-ed25519 ')
    assert line.split()[-1] == key.public.split()[1]
    assert sshd.entry("passwd", account)[6] == "/bin/sh"
    held = sshd.sandbox / "var" / "lib" / "b200-access" / "held" / account
    assert not (spool / account).exists() and (held / f"cron-{account}").read_text().startswith("* * * * *")
    assert again.exit_code == 0 and json.loads(again.stdout)["changed"] is False

    # When a key replacement asked for before the end reaches the node in the window
    new_key = make_ssh_key()
    access.driver.put_file(new_key.public.encode() + b"\n", "new-key.pub", mode=0o600)
    expires = (UNTIL + dt.timedelta(days=1)).isoformat()
    rekeyed = access("rekey", "--account", account, "--key-file", "new-key.pub", "--expires", expires)

    # Then it is refused: the window's key stays as it is (never widened to a login)
    assert rekeyed.exit_code == 3, rekeyed.stderr
    assert keys_line(sshd, account) == line

    # When an extension grants the account again
    assert access.grant(account, key).exit_code == 0

    # Then the whole login is back: the plain key, bash
    assert keys_line(sshd, account).startswith('expiry-time="')
    assert sshd.entry("passwd", account)[6] == "/bin/bash"

    # And the clean end of rental takes the held crontab with the account
    assert access.revoke(account).exit_code == 0
    assert not held.exists()


# A tenant's loop that puts its whole key back as soon as anything else writes the file (the tenant owns ~/.ssh).
KEY_KEEPER = (
    "cp ~/.ssh/authorized_keys ~/keep; "
    "setsid sh -c 'while :; do cp ~/keep ~/.ssh/k.new 2>/dev/null && mv -f ~/.ssh/k.new ~/.ssh/authorized_keys; "
    "sleep 0.01; done' </dev/null >/dev/null 2>&1 & echo $!"
)


def test_a_tenants_loop_rewriting_its_key_gets_no_shell_in_the_data_window(access, sshd, account, make_ssh_key):
    # Given a tenant whose loop keeps rewriting ~/.ssh/authorized_keys with its whole (unrestricted) key
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    with login(sshd, account, key) as session:
        keeper = session.run(["sh", "-c", KEY_KEEPER], timeout=30).stdout.strip()
    assert running(keeper)

    # When the data window opens
    opened = access("grace", "--account", account, "--until", UNTIL.isoformat())

    # Then the loop is dead, the key stays limited to read-only SFTP, and a command gets no shell
    assert opened.exit_code == 0, opened.stderr
    time.sleep(0.5)
    assert not running(keeper)
    assert keys_line(sshd, account).startswith('restrict,command="')
    tried = ssh_command(sshd, key.private, account, "id")
    assert "uid=" not in tried.stdout, tried.stdout


def test_a_key_planted_in_authorized_keys2_gives_no_shell_in_the_data_window(
    stock_access, stock_sshd, account, make_ssh_key
):
    access, sshd = stock_access, stock_sshd
    # Given a tenant (on an sshd with OpenSSH's stock AuthorizedKeysFile) who put a second key of its own, with no
    # restriction, in authorized_keys2
    key, planted = make_ssh_key(), make_ssh_key("planted@laptop")
    assert access.grant(account, key).exit_code == 0
    with login(sshd, account, key) as session:
        session.put_file(planted.public.encode() + b"\n", f"/home/{account}/.ssh/authorized_keys2")

    # When the data window opens
    assert access("grace", "--account", account, "--until", UNTIL.isoformat()).exit_code == 0

    # Then the planted key opens nothing (before: a shell, and the cards, for the whole window)
    tried = ssh_command(sshd, planted.private, account, "id")
    assert "uid=" not in tried.stdout, tried.stdout
    assert not (sshd.home(account) / ".ssh" / "authorized_keys2").exists()


def test_a_tenant_deleting_its_key_file_neither_keeps_its_processes_nor_loses_the_window(
    access, sshd, account, make_ssh_key
):
    # Given a tenant who deleted its authorized_keys and left a job running
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    with login(sshd, account, key) as session:
        job = session.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!"], timeout=30)
        session.run(["rm", "-f", f"/home/{account}/.ssh/authorized_keys"], timeout=30)
    assert running(job.stdout.strip())

    # When the data window opens
    opened = access("grace", "--account", account, "--until", UNTIL.isoformat())

    # Then the job was stopped, and the window opens all the same on the key the tenant cannot touch: read-only SFTP
    assert opened.exit_code == 0, opened.stderr
    time.sleep(0.2)
    assert not running(job.stdout.strip())
    assert keys_line(sshd, account).startswith('restrict,command="')
    tried = ssh_command(sshd, key.private, account, "id")
    assert "uid=" not in tried.stdout, tried.stdout


def test_with_no_key_anywhere_the_window_stays_shut_and_the_tenant_is_stopped(access, sshd, account, make_ssh_key):
    # Given a tenant with a job running, and no key file left at all (the held one lost on the node)
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    with login(sshd, account, key) as session:
        job = session.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!"], timeout=30)
        session.run(["rm", "-f", f"/home/{account}/.ssh/authorized_keys"], timeout=30)
    sshd.held_key(account).unlink()

    # When the data window opens
    opened = access("grace", "--account", account, "--until", UNTIL.isoformat())

    # Then there is no window (no key to limit), but the job was stopped all the same and nobody logs in
    assert opened.exit_code != 0 and "no installed key" in opened.stderr
    time.sleep(0.2)
    assert not running(job.stdout.strip())
    assert sshd.entry("shadow", account)[7] == "1"  # locked: expired since 1970-01-02
    with pytest.raises(DriverError):
        login(sshd, account, key)


def test_grace_refuses_an_account_the_tool_did_not_make_and_reports_one_that_is_gone(access, account):
    refused = access("grace", "--account", "root", "--until", UNTIL.isoformat())
    assert refused.exit_code == 3 and "not created by this tool" in refused.stderr
    gone = access("grace", "--account", account, "--until", UNTIL.isoformat())
    assert gone.exit_code == 0 and json.loads(gone.stdout) == {"account": account, "existed": False}


def test_a_node_without_sftp_server_gets_no_window(monkeypatch, tmp_path):
    monkeypatch.setattr(tool, "SFTP_SERVERS", (str(tmp_path / "sftp-server"),))
    with pytest.raises(tool.Failed, match="no sftp-server on this node"):
        tool.sftp_server()
