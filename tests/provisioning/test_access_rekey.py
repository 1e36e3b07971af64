"""access.py rekey through the ssh driver into the sandboxed node: the customer's new key replaces the bound one,
the old key stops working, and the rekey is as careful as the grant (links, ownership, accounts not ours)."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from provisioning.drivers import DriverError
from tests.provisioning.conftest import login, machine_user_files_digest


@pytest.fixture(scope="module", autouse=True)
def machine_users_untouched():
    before = machine_user_files_digest()
    yield
    assert machine_user_files_digest() == before, "the tests changed the machine's own user database"


def rekey(access, account: str, key, *extra: str):
    name = f"new-{key.private.name}.pub"
    access.driver.put_file(key.public.encode() + b"\n", name, mode=0o600)
    return access("rekey", "--account", account, "--key-file", name, *extra)


def test_a_rekeyed_account_opens_with_the_new_key_only_and_keeps_its_expiry(access, sshd, account, make_ssh_key):
    # Given an account granted to the customer's first key
    old, new = make_ssh_key("old@laptop"), make_ssh_key("new@laptop")
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=3)
    assert access.grant(account, old, expires=expires).exit_code == 0
    keys_file = sshd.home(account) / ".ssh" / "authorized_keys"
    expiry_option = keys_file.read_text().split(" ", 1)[0]

    # When the key is replaced
    result = rekey(access, account, new)

    # Then the new key logs in, the old one is refused, and the file holds exactly the new key, same backstop
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["changed"] is True
    with login(sshd, account, new) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, old)
    key_type, data = new.public.split()[:2]
    assert keys_file.read_text() == f"{expiry_option} {key_type} {data}\n"
    shown = access.show(account)
    assert shown["bound_key"] == new.fingerprint
    assert [key["fingerprint"] for key in shown["authorized_keys"]] == [new.fingerprint]
    info = keys_file.stat()
    assert (info.st_uid, oct(info.st_mode & 0o777)) == (shown["uid"], "0o600")


def test_a_key_the_tenant_copied_to_authorized_keys2_stops_working_at_the_rekey(
    stock_access, stock_sshd, account, make_ssh_key
):
    access, sshd = stock_access, stock_sshd
    # Given an account (on an sshd with OpenSSH's stock AuthorizedKeysFile) whose key was copied to authorized_keys2
    old, new = make_ssh_key("old@laptop"), make_ssh_key("new@laptop")
    assert access.grant(account, old).exit_code == 0
    with login(sshd, account, old) as session:
        planted = session.run(
            ["cp", f"/home/{account}/.ssh/authorized_keys", f"/home/{account}/.ssh/authorized_keys2"], timeout=30
        )
    assert planted.exit_code == 0, planted.stderr

    # When the key is replaced (the old one leaked)
    assert rekey(access, account, new).exit_code == 0

    # Then the old key is refused (before: it still logged in through authorized_keys2)
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, old)
    assert not (sshd.home(account) / ".ssh" / "authorized_keys2").exists()


def test_after_a_rekey_the_old_key_cannot_be_granted_back_and_the_new_one_can(access, sshd, account, make_ssh_key):
    old, new = make_ssh_key("old@laptop"), make_ssh_key("new@laptop")
    access.grant(account, old)
    assert rekey(access, account, new).exit_code == 0

    back = access.grant(account, old)
    refreshed = access.grant(account, new)

    assert back.exit_code == 3 and "bound to the key" in back.stderr
    assert refreshed.exit_code == 0, refreshed.stderr
    with login(sshd, account, new) as session:
        assert session.run(["true"], timeout=30).exit_code == 0


def test_rekeying_again_with_the_same_key_changes_nothing(access, sshd, account, make_ssh_key):
    old, new = make_ssh_key(), make_ssh_key()
    access.grant(account, old)
    assert rekey(access, account, new).exit_code == 0
    keys_file = sshd.home(account) / ".ssh" / "authorized_keys"
    before = (keys_file.read_bytes(), keys_file.stat().st_ino, sshd.etc("passwd").read_bytes())

    again = rekey(access, account, new)

    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["changed"] is False
    assert (keys_file.read_bytes(), keys_file.stat().st_ino, sshd.etc("passwd").read_bytes()) == before


@pytest.mark.parametrize(
    "key_text",
    [
        'command="/bin/sh" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEBSWXZm5wd5ap6JDVZXxRRYD4MpjxOQRbBwqzLsGDpd',
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEBSWXZm5wd5ap6JDVZXxRRYD4MpjxOQRbBwqzLsGDpd a\n"
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ5UIWPBc1yXz5HmP1wq7nLbKLuO9KqV3a1W8i/yDNTu b",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEBSWXZm5wd5ap6JDVZXxRRYD4MpjxOQRbBwqzLsGD\0pd",
        "",
    ],
    ids=["with-options", "two-keys", "nul-byte", "empty"],
)
def test_a_refused_new_key_exits_4_and_the_old_key_keeps_working(access, sshd, account, make_ssh_key, key_text):
    old = make_ssh_key()
    access.grant(account, old)
    keys_file = sshd.home(account) / ".ssh" / "authorized_keys"
    before = (keys_file.read_bytes(), sshd.etc("passwd").read_bytes())
    access.driver.put_file(key_text.encode(), "bad.pub")

    result = access("rekey", "--account", account, "--key-file", "bad.pub")

    assert result.exit_code == 4, result.stderr
    assert (keys_file.read_bytes(), sshd.etc("passwd").read_bytes()) == before
    with login(sshd, account, old) as session:
        assert session.run(["true"], timeout=30).exit_code == 0


def test_a_rekey_never_follows_a_link_the_customer_planted(access, sshd, account, make_ssh_key, tmp_path):
    old, new = make_ssh_key(), make_ssh_key()
    trap = tmp_path / "trap"
    trap.mkdir()
    (trap / "authorized_keys").write_text("untouched\n")
    access.grant(account, old)
    with login(sshd, account, old) as session:
        planted = session.run(["sh", "-c", f"rm -rf ~/.ssh && ln -s {trap} ~/.ssh"], timeout=30)
    assert planted.exit_code == 0, planted.stderr

    result = rekey(access, account, new, "--expires", "2031-01-01T00:00Z")

    assert result.exit_code == 0, result.stderr
    assert sorted(os.listdir(trap)) == ["authorized_keys"]
    assert (trap / "authorized_keys").read_text() == "untouched\n"
    assert not (sshd.home(account) / ".ssh").is_symlink()
    with login(sshd, account, new) as session:
        assert session.run(["id", "-un"], timeout=30).stdout == f"{account}\n"


def test_without_an_installed_key_or_expires_the_rekey_fails_saying_so(access, sshd, account, make_ssh_key):
    old, new = make_ssh_key(), make_ssh_key()
    access.grant(account, old)
    # Both copies gone (the tenant's own, and the held one, as on a node the tool was installed on mid-rental)
    (sshd.home(account) / ".ssh" / "authorized_keys").unlink()
    sshd.held_key(account).unlink()

    result = rekey(access, account, new)

    assert result.exit_code == 1
    assert "pass --expires" in result.stderr


@pytest.mark.parametrize("name", ["root", "sshd", "daemon"])
def test_accounts_the_tool_did_not_create_are_never_rekeyed(access, sshd, make_ssh_key, name):
    passwd_before = sshd.etc("passwd").read_bytes()

    result = rekey(access, name, make_ssh_key(), "--expires", "2031-01-01T00:00Z")

    assert result.exit_code == 3
    assert "not created by this tool" in result.stderr
    assert sshd.etc("passwd").read_bytes() == passwd_before


def test_a_key_limited_on_purpose_is_never_widened_by_a_rekey(access, sshd, account, make_ssh_key):
    # Given an account whose key the node limited to read-only SFTP (the data window after the rental's end)
    old, new = make_ssh_key(), make_ssh_key()
    access.grant(account, old)
    keys_file = sshd.home(account) / ".ssh" / "authorized_keys"
    key_type, data = old.public.split()[:2]
    limited = f'restrict,command="internal-sftp -R",expiry-time="203101010000Z" {key_type} {data}\n'
    keys_file.write_text(limited)
    sshd.held_key(account).write_text(limited)
    before = sshd.etc("passwd").read_bytes()

    # When a rekey asks for a plain key, with an explicit expiry
    result = rekey(access, account, new, "--expires", "2031-01-01T00:00Z")

    # Then it is refused and nothing changed: the limit stays, the new key opens nothing
    assert result.exit_code == 3
    assert "restrictions" in result.stderr
    assert keys_file.read_text() == limited and sshd.held_key(account).read_text() == limited
    assert sshd.etc("passwd").read_bytes() == before
    with pytest.raises(DriverError, match="refused the key"):
        login(sshd, account, new)
