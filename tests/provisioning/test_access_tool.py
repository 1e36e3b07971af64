"""access.py through the ssh driver into the sandboxed node: what the customer and the operator notice."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import subprocess
import time

import pytest

from provisioning.drivers import DriverError
from tests import security_keys
from tests.provisioning.conftest import login, machine_user_files_digest
from tests.servers import server_missing


@pytest.fixture(scope="module", autouse=True)
def machine_users_untouched():
    """Around the whole module: the machine's passwd, shadow and group files end as they began."""
    before = machine_user_files_digest()
    yield
    assert machine_user_files_digest() == before, "the tests changed the machine's own user database"


def in_days(days: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(days=days)


def ssh_client(sshd, tmp_path, key, *command: str, stdin: str = "") -> subprocess.CompletedProcess:
    """OpenSSH's own `ssh`, as a customer types it, with the node's host key as the only known host."""
    if shutil.which("ssh") is None:
        server_missing("the ssh client (openssh-client)")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[{sshd.host}]:{sshd.port} {sshd.host_key}\n")
    options = ["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes"]
    options += ["-o", f"UserKnownHostsFile={known_hosts}", "-i", str(key.private)]
    return subprocess.run(
        [*command[:1], *options, *command[1:]], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_granted_customer_logs_in_with_their_key_and_copies_files_home(access, sshd, account, make_ssh_key):
    key = make_ssh_key()

    granted = access.grant(account, key, expires=in_days(7))

    assert granted.exit_code == 0, granted.stderr
    report = json.loads(granted.stdout)
    assert (report["account"], report["created"], report["key_fingerprint"]) == (account, True, key.fingerprint)
    with login(sshd, account, key) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
        session.put_file(b"weights", f"/home/{account}/model.safetensors")  # SFTP
        assert session.run(["cat", "model.safetensors"], timeout=30).exit_code == 1  # the workdir is elsewhere
        assert session.run(["cat", f"/home/{account}/model.safetensors"], timeout=30).stdout == "weights"
    uploaded = sshd.home(account) / "model.safetensors"
    assert uploaded.stat().st_uid == int(sshd.entry("passwd", account)[2])


def test_the_customer_can_use_plain_ssh_and_scp(access, sshd, account, make_ssh_key, tmp_path):
    key = make_ssh_key()
    access.grant(account, key)
    (tmp_path / "train.py").write_text("print('hello B200')\n")

    target = f"{account}@{sshd.host}"
    whoami = ssh_client(sshd, tmp_path, key, "ssh", "-p", str(sshd.port), target, "id -un")
    copied = ssh_client(
        sshd, tmp_path, key, "scp", "-O", "-P", str(sshd.port), str(tmp_path / "train.py"), f"{target}:"
    )
    fetched = ssh_client(
        sshd, tmp_path, key, "sftp", "-P", str(sshd.port), "-b", "-", target,
        stdin=f"get train.py {tmp_path / 'back.py'}\n",
    )  # fmt: skip

    assert (whoami.returncode, whoami.stdout) == (0, f"{account}\n"), whoami.stderr
    assert copied.returncode == 0, copied.stderr
    assert (sshd.home(account) / "train.py").read_text() == "print('hello B200')\n"
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "back.py").read_text() == "print('hello B200')\n"


def test_the_account_has_no_password_a_private_home_and_only_the_customers_key(access, sshd, account, make_ssh_key):
    key = make_ssh_key()
    expires = dt.datetime(2031, 5, 17, 14, 45, 30, tzinfo=dt.UTC)

    access.grant(account, key, expires=expires)

    passwd = sshd.entry("passwd", account)
    shadow = sshd.entry("shadow", account)
    assert (passwd[5], passwd[6]) == (f"/home/{account}", "/bin/bash")
    assert shadow[1] == "*"  # no password can ever match
    assert dt.date(1970, 1, 1) + dt.timedelta(days=int(shadow[7])) == dt.date(2031, 5, 18)  # the day after the end
    home = sshd.home(account)
    uid, gid = int(passwd[2]), int(passwd[3])
    for path, mode in ((home, 0o700), (home / ".ssh", 0o700), (home / ".ssh" / "authorized_keys", 0o600)):
        info = path.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (mode, uid, gid), path
    key_type, data = key.public.split()[:2]
    assert (home / ".ssh" / "authorized_keys").read_text() == f'expiry-time="203105171445Z" {key_type} {data}\n'
    shown = access.show(account)
    assert shown["password"] == "none"
    assert shown["authorized_keys"] == [
        {"type": "ssh-ed25519", "fingerprint": key.fingerprint, "expiry_time": "2031-05-17T14:45Z"}
    ]


def test_granting_again_with_the_same_key_changes_nothing(access, sshd, account, make_ssh_key):
    key = make_ssh_key()
    expires = in_days(3)
    access.grant(account, key, expires=expires)
    keys_file = sshd.home(account) / ".ssh" / "authorized_keys"
    before = (keys_file.read_bytes(), keys_file.stat().st_ino, sshd.etc("passwd").read_bytes())

    again = access.grant(account, key, expires=expires)

    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["changed"] is False
    assert (keys_file.read_bytes(), keys_file.stat().st_ino, sshd.etc("passwd").read_bytes()) == before
    with login(sshd, account, key) as session:
        assert session.run(["id", "-un"], timeout=30).exit_code == 0


def test_the_key_is_never_rotated_away_by_a_grant_with_another_key(access, sshd, account, make_ssh_key):
    customer, intruder = make_ssh_key("customer@lab"), make_ssh_key("someone@else")
    access.grant(account, customer)

    replaced = access.grant(account, intruder)

    assert replaced.exit_code == 3
    assert "bound to the key" in replaced.stderr
    with login(sshd, account, customer) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, intruder)


@pytest.mark.parametrize(
    "trick",
    [
        "rm -rf ~/.ssh && ln -s {trap} ~/.ssh",
        "rm -f ~/.ssh/authorized_keys && ln -s {trap}/authorized_keys ~/.ssh/authorized_keys",
    ],
    ids=["ssh-dir-link", "keys-file-link"],
)
def test_a_regrant_never_follows_links_the_customer_planted(access, sshd, account, make_ssh_key, tmp_path, trick):
    key = make_ssh_key()
    trap = tmp_path / "trap"
    trap.mkdir()
    (trap / "authorized_keys").write_text("untouched\n")
    access.grant(account, key)
    with login(sshd, account, key) as session:
        assert session.run(["sh", "-c", trick.format(trap=trap)], timeout=30).exit_code == 0

    repaired = access.grant(account, key)

    assert repaired.exit_code == 0, repaired.stderr
    assert sorted(os.listdir(trap)) == ["authorized_keys"]
    assert (trap / "authorized_keys").read_text() == "untouched\n"
    assert not (sshd.home(account) / ".ssh").is_symlink()
    with login(sshd, account, key) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"


def test_another_customers_key_is_refused(access, sshd, account, make_ssh_key):
    first, second = make_ssh_key("first@lab"), make_ssh_key("second@lab")
    other_account = account + "-b"
    access.grant(account, first)
    access.grant(other_account, second)

    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, second)
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, other_account, first)
    with login(sshd, other_account, second) as session:
        peek = session.run(["ls", f"/home/{account}"], timeout=30)
    assert peek.exit_code != 0 and "Permission denied" in peek.stderr


def test_after_revoke_the_login_is_refused_the_processes_killed_and_the_home_gone(access, sshd, account, make_ssh_key):
    key = make_ssh_key()
    access.grant(account, key)
    with login(sshd, account, key) as session:
        session.put_file(b"checkpoint", f"/home/{account}/ckpt.pt")
        started = session.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!"], timeout=30)
    left_running = started.stdout.strip()
    assert os.path.exists(f"/proc/{left_running}")

    revoked = access.revoke(account)

    assert revoked.exit_code == 0, revoked.stderr
    assert json.loads(revoked.stdout)["removed"] is True
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, key)
    assert not sshd.home(account).exists()
    assert sshd.entry("passwd", account) is None
    assert sshd.entry("group", account) is None
    time.sleep(0.2)
    assert not running(left_running)
    assert access.show(account) == {"account": account, "exists": False}


def running(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


def test_revoking_twice_is_harmless(access, account, make_ssh_key):
    access.grant(account, make_ssh_key())
    assert access.revoke(account).exit_code == 0

    again = access.revoke(account)

    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == {"account": account, "existed": False, "removed": False, "processes_killed": 0}


@pytest.mark.parametrize("ago", [dt.timedelta(minutes=5), dt.timedelta(days=2)], ids=["minutes-ago", "days-ago"])
def test_an_expired_grant_is_refused_by_sshd_at_login(access, sshd, account, make_ssh_key, ago):
    key = make_ssh_key()

    granted = access.grant(account, key, expires=dt.datetime.now(dt.UTC) - ago)

    assert granted.exit_code == 0, granted.stderr
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, key)


@pytest.mark.parametrize("name", ["root", "sshd", "daemon"])
def test_accounts_the_tool_did_not_create_are_never_touched(access, sshd, make_ssh_key, name):
    passwd_before = sshd.etc("passwd").read_bytes()

    granted = access.grant(name, make_ssh_key())
    revoked = access.revoke(name)

    assert (granted.exit_code, revoked.exit_code) == (3, 3)
    assert "not created by this tool" in granted.stderr
    assert sshd.etc("passwd").read_bytes() == passwd_before


@pytest.mark.parametrize("name", ["O-ABC", "-rf", "a", "o_b2k", "x" * 32, "o-b2k;id", "../etc"])
def test_invalid_account_names_are_a_usage_error(access, name):
    result = access("show", f"--account={name}")

    assert result.exit_code == 2
    assert "invalid account name" in result.stderr


@pytest.mark.parametrize(
    "key_text",
    [
        'command="/bin/sh" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEBSWXZm5wd5ap6JDVZXxRRYD4MpjxOQRbBwqzLsGDpd',
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEBSWXZm5wd5ap6JDVZXxRRYD4MpjxOQRbBwqzLsGDpd a\n"
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ5UIWPBc1yXz5HmP1wq7nLbKLuO9KqV3a1W8i/yDNTu b",
        "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIEBSWXZm5wd5ap6JDVZXxRRYD4MpjxOQRbBwqzLsGDpd",
        "",
    ],
    ids=["with-options", "two-keys", "type-mismatch", "empty"],
)
def test_a_key_file_that_is_not_exactly_one_plain_key_is_refused(access, sshd, account, key_text):
    access.driver.put_file(key_text.encode(), "bad.pub")
    access.granted.append(account)

    result = access("grant", "--account", account, "--key-file", "bad.pub", "--expires", "2031-01-01T00:00Z")

    assert result.exit_code == 4  # the caller's key, not the node: the shop fails the order's step, not the node
    assert sshd.entry("passwd", account) is None


def test_a_key_whose_comment_is_not_ascii_is_granted_and_works(access, sshd, account, make_ssh_key):
    key = make_ssh_key("josé@laptop")

    granted = access.grant(account, key)

    assert granted.exit_code == 0, granted.stderr
    key_type, data = key.public.split()[:2]
    assert (sshd.home(account) / ".ssh" / "authorized_keys").read_text().endswith(f" {key_type} {data}\n")
    with login(sshd, account, key) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"


def test_a_key_file_that_is_not_utf8_is_refused_as_the_callers_input(access, sshd, account, make_ssh_key):
    access.driver.put_file(make_ssh_key().public.encode() + b" caf\xe9\n", "latin1.pub")
    access.granted.append(account)

    result = access("grant", "--account", account, "--key-file", "latin1.pub", "--expires", "2031-01-01T00:00Z")

    assert result.exit_code == 4 and "UTF-8" in result.stderr
    assert sshd.entry("passwd", account) is None


@pytest.mark.parametrize("make_blob", security_keys.BROKEN.values(), ids=security_keys.BROKEN.keys())
def test_a_broken_security_key_is_refused_by_the_node(access, sshd, account, make_blob):
    access.driver.put_file(security_keys.sk_line(make_blob()).encode() + b"\n", "sk.pub")
    access.granted.append(account)

    result = access("grant", "--account", account, "--key-file", "sk.pub", "--expires", "2031-01-01T00:00Z")

    assert result.exit_code == 4, result.stdout + result.stderr
    assert "refused" in result.stderr
    assert sshd.entry("passwd", account) is None


@pytest.mark.parametrize("make_blob", security_keys.SOUND.values(), ids=security_keys.SOUND.keys())
def test_a_sound_security_key_is_installed_as_it_is(access, sshd, account, make_blob):
    line = security_keys.sk_line(make_blob())
    access.driver.put_file(line.encode() + b"\n", "sk.pub")
    access.granted.append(account)

    result = access("grant", "--account", account, "--key-file", "sk.pub", "--expires", "2031-01-01T00:00Z")

    assert result.exit_code == 0, result.stderr
    key_type, data = line.split()[:2]
    installed = (sshd.home(account) / ".ssh" / "authorized_keys").read_text()
    assert installed == f'expiry-time="203101010000Z" {key_type} {data}\n'


def test_expires_without_a_time_zone_is_a_usage_error(access, account):
    result = access("grant", "--account", account, "--key-file", "k.pub", "--expires", "2031-01-01T00:00")

    assert result.exit_code == 2
    assert "no time zone" in result.stderr


def test_the_machines_own_users_and_homes_are_untouched(access, sshd, account, make_ssh_key):
    before = machine_user_files_digest()
    key = make_ssh_key()

    access.grant(account, key)
    with login(sshd, account, key) as session:
        session.run(["touch", f"/home/{account}/here"], timeout=30)
    access.revoke(account)

    assert machine_user_files_digest() == before
    assert not os.path.exists(f"/home/{account}")
    assert subprocess.run(["id", account], capture_output=True).returncode != 0
