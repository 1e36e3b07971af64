"""Keys where the tenant cannot write them (issue 39): the access tool keeps each account's key in a file only root
writes, /etc/ssh/authorized_keys/ACCOUNT, which the node's sshd reads instead of anything in the home; `sshd-check`
reads `sshd -T` and says when a node's configuration would let a tenant add keys. On the sandboxed sshd (the
setting docs/production.md asks for) and on one with OpenSSH's stock AuthorizedKeysFile (a node set up wrong)."""

from __future__ import annotations

import json
import os

import pytest

from provisioning.drivers import DriverError
from provisioning.node_tools import access as tool
from tests.provisioning.conftest import login, machine_user_files_digest


@pytest.fixture(scope="module", autouse=True)
def machine_users_untouched():
    before = machine_user_files_digest()
    yield
    assert machine_user_files_digest() == before, "the tests changed the machine's own user database"


def test_a_key_the_tenant_writes_into_its_home_never_logs_in(access, sshd, account, make_ssh_key):
    # Given a granted account whose key sshd reads from the root-held file
    key, planted = make_ssh_key(), make_ssh_key("planted@laptop")
    assert access.grant(account, key).exit_code == 0
    held = sshd.held_key(account)
    info = held.stat()
    assert (info.st_uid, info.st_gid, oct(info.st_mode & 0o777)) == (0, int(sshd.entry("passwd", account)[3]), "0o640")

    # When the tenant replaces its own key files with a key of its choosing, without the expiry the shop set
    with login(sshd, account, key) as session:
        for name in ("authorized_keys", "authorized_keys2"):
            session.put_file(planted.public.encode() + b"\n", f"/home/{account}/.ssh/{name}")

    # Then that key opens nothing (on a stock sshd it gave a login for as long as the tenant liked), and the shop's
    # key, in the file the tenant cannot touch, still logs in
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, planted)
    with login(sshd, account, key) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
        tried = session.run(["sh", "-c", f"echo x >> /etc/ssh/authorized_keys/{account}"], timeout=30)
    assert tried.exit_code != 0
    assert key.public.split()[1] in held.read_text() and planted.public.split()[1] not in held.read_text()


def test_revoke_removes_the_held_key(access, sshd, account, make_ssh_key):
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0

    assert access.revoke(account).exit_code == 0

    assert not sshd.held_key(account).exists()
    with pytest.raises(DriverError):
        login(sshd, account, key)


def test_sshd_check_accepts_the_root_held_setting(access, account):
    result = access("sshd-check", "--account", account)

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "ok": True,
        "account": account,
        "authorized_keys_file": ["/etc/ssh/authorized_keys/%u"],
        "problems": [],
    }


def test_sshd_check_refuses_openssh_stock_setting(stock_access, account):
    # A stock sshd reads ~/.ssh/authorized_keys and ~/.ssh/authorized_keys2, which the tenant owns
    result = stock_access("sshd-check", "--account", account)

    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["authorized_keys_file"] == [".ssh/authorized_keys", ".ssh/authorized_keys2"]
    assert report["problems"] == [
        ".ssh/authorized_keys is in the tenant's home, which the tenant owns",
        ".ssh/authorized_keys2 is in the tenant's home, which the tenant owns",
        "sshd does not read /etc/ssh/authorized_keys/%u, where this tool keeps the customer's key",
    ]


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("%h/.ssh/authorized_keys", "in the tenant's home"),
        ("~/.ssh/keys", "in the tenant's home"),
        ("/tmp/keys-%u", "a folder someone other than root may write into"),
        ("/etc/ssh/authorized_keys/%u", ""),
    ],
)
def test_a_key_file_in_a_folder_others_write_is_a_problem(pattern, problem):
    found = tool.key_file_problem(tool.Users(""), pattern, "o-abcdef")

    assert (problem in found) if problem else found == "", found


def test_a_key_folder_someone_else_owns_is_never_written(access, sshd, account, make_ssh_key):
    # Given the folder of held keys handed to a login that is not root (a node set up wrong, or tampered with)
    folder = sshd.etc("ssh") / "authorized_keys"
    folder.mkdir(mode=0o755, exist_ok=True)
    os.chown(folder, 1, 1)
    try:
        # When an account is granted
        result = access.grant(account, make_ssh_key())

        # Then the tool refuses to write a key there, saying why
        assert result.exit_code == 1
        assert "is not a root-owned path that only root writes into" in result.stderr
    finally:
        os.chown(folder, 0, 0)
