"""The end of a rental, proven clean on the sandboxed sshd: what a tenant plants in its home, /tmp, /var/tmp,
/dev/shm and the node's scratch folder, the processes it leaves running (one respawning, one holding a GPU)
and its shared memory are all gone after revoke; the next account's uid was never used before; and where the
scrub cannot finish, revoke fails saying why, keeps the account locked, and a rerun completes it.

The sandbox (tests/sshd.py) shares the machine's /tmp, /var/tmp and /dev/shm with its sessions; its scratch
folder /run/scratch lives on the namespace's own tmpfs, outside those three, so only the configured scratch
sweep (`--scratch`) reaches it; the GPUs are the sandbox's FAKE nvidia-smi (no GPU on this machine).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from provisioning import node_tools
from tests.provisioning.conftest import login
from tests.sshd import FAKE_CARD, SCRATCH

SWEPT = ("/tmp", "/var/tmp", "/dev/shm", SCRATCH)
NVIDIA_SMI = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"]

# What a tenant leaves behind, as the shell commands it types: odd names (spaces, a newline, a leading dash),
# folders its owner cannot write or even enter, a hard link, links to the system outside, a fifo, shared
# memory, a process that keeps starting others in new sessions, and one holding a GPU.
PLANT = r"""
set -e
mkdir -p ~/nested/locked; echo w > ~/nested/locked/weights; chmod 0 ~/nested/locked ~/nested
for d in /tmp /var/tmp /dev/shm {scratch}; do
  mkdir "$d/{tag}-dir"; echo secret > "$d/{tag}-dir/inner"
  printf x > "$d/{tag} name with spaces"
  printf x > "$d/{tag}-new
line"
  printf x > "$d/-{tag}-dash"
  mkdir -p "$d/{tag}-locked/a/b"; touch "$d/{tag}-locked/a/b/deep"; chmod 0 "$d/{tag}-locked/a" "$d/{tag}-locked"
  ln -s /etc "$d/{tag}-etc-link"; ln -s /etc/hostname "$d/{tag}-file-link"
done
echo weights > /tmp/{tag}-file; ln /tmp/{tag}-file /tmp/{tag}-hard
mkfifo /dev/shm/{tag}-fifo
ipcmk -M 4096 >/dev/null
setsid sh -c 'while :; do setsid sleep 600 </dev/null >/dev/null 2>&1 & sleep 0.05; done' </dev/null >/dev/null 2>&1 &
setsid sleep 600 3<{card} </dev/null >/dev/null 2>&1 &
sleep 0.3
"""


@pytest.fixture
def gpus(sshd):
    """The node has GPUs (the sandbox's FAKE nvidia-smi) for this test."""
    sshd.install_fake_nvidia_smi()
    yield
    sshd.remove_fake_nvidia_smi()


def uid_of(sshd, account: str) -> int:
    return int(sshd.entry("passwd", account)[2])


def files_of(driver, uid: int, tag: str) -> list[str]:
    """Everything in the swept places (and the homes) that the uid owns or that bears the tenant's tag, seen
    from inside the node (the scratch folder exists there only). Another test run's sandbox under /tmp numbers
    its own accounts from the same machine's uids: its homes are not this node's."""
    script = f"find -P {' '.join(SWEPT)} /home -xdev \\( -uid {uid} -o -name '*{tag}*' \\) -print0 2>/dev/null; true"
    result = driver.run(["sh", "-c", script], timeout=60)
    paths = [path for path in result.stdout.split("\0") if path]
    return [path for path in paths if tag in path or not re.search(r"^/tmp/pytest-of-[^/]+/.*/sandbox/home/", path)]


def processes_of(uid: int) -> list[int]:
    pids = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        state = re.search(r"^State:\s+(\S)", status, re.MULTILINE)
        uids = re.search(r"^Uid:\s+(.*)$", status, re.MULTILINE)
        if state and state.group(1) not in "ZX" and uids and str(uid) in uids.group(1).split():
            pids.append(int(name))
    return pids


def shared_memory_of(uid: int) -> list[str]:
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()
    header = rows[0].split()
    return [row for row in rows[1:] if str(uid) in (dict(zip(header, row.split(), strict=False))["uid"],)]


def on_the_gpus(driver) -> list[str]:
    result = driver.run(NVIDIA_SMI, timeout=30)
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


def make_read_only(operator_driver, folder: str) -> None:
    """Mount the folder read-only over itself: what it holds can no longer be removed, as on a node whose
    tenant left files under a read-only mount."""
    remount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    assert operator_driver.run(["sh", "-c", remount], timeout=30).exit_code == 0


def test_the_end_of_rental_leaves_nothing_of_the_tenant_and_its_uid_is_never_handed_out_again(
    access, sshd, operator_driver, account, make_ssh_key, gpus
):
    # Given an earlier tenant, revoked, and the current one, the highest uid yet, who planted everywhere
    earlier = account + "-a"
    assert access.grant(earlier, make_ssh_key()).exit_code == 0
    earlier_uid = uid_of(sshd, earlier)
    assert access.revoke(earlier).exit_code == 0
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    uid = uid_of(sshd, account)
    with login(sshd, account, key) as session:
        planted = session.run(["sh", "-c", PLANT.format(tag=account, scratch=SCRATCH, card=FAKE_CARD)], timeout=60)
    assert planted.exit_code == 0, planted.stderr
    assert len(files_of(operator_driver, uid, account)) > 40
    assert len(processes_of(uid)) >= 3
    assert shared_memory_of(uid)
    assert len(on_the_gpus(operator_driver)) == 1

    # When its access is revoked, the node's scratch folder given
    revoked = access.revoke(account, scratch=(SCRATCH,))

    # Then nothing of it is left: no file anywhere, no process, no shared memory, nothing on the GPUs
    assert revoked.exit_code == 0, revoked.stderr
    report = json.loads(revoked.stdout)
    assert report["removed"] is True and SCRATCH in report["swept"]
    assert report["gpus"] == "no process left on the cards"
    assert files_of(operator_driver, uid, account) == []
    assert processes_of(uid) == []
    assert shared_memory_of(uid) == []
    assert on_the_gpus(operator_driver) == []
    assert sshd.entry("passwd", account) is None and not sshd.home(account).exists()
    # The links were removed, never followed
    assert Path("/etc/hostname").exists() and Path("/etc/passwd").exists()

    # And the next account, made after the highest uid was deleted, gets a uid never handed out before
    after = account + "-c"
    assert access.grant(after, make_ssh_key()).exit_code == 0
    assert uid_of(sshd, after) > uid > earlier_uid
    left_to_it = files_of(operator_driver, uid_of(sshd, after), after)
    # Its own: its home (the sandbox's homes lie under /tmp too) and the key file the grant just wrote for it
    its_own = (f"/home/{after}", str(sshd.home(after)), str(sshd.held_key(after)))
    assert [path for path in left_to_it if not path.startswith(its_own)] == []


def test_a_file_that_cannot_be_removed_fails_the_revocation_and_a_rerun_completes_it(
    access, sshd, operator_driver, account, make_ssh_key
):
    # Given a tenant's file in the scratch folder that has become read-only (a mount over its folder)
    key = make_ssh_key()
    access.grant(account, key)
    uid = uid_of(sshd, account)
    stuck = f"{SCRATCH}/{account}-stuck"
    with login(sshd, account, key) as session:
        planted = session.run(["sh", "-c", f"mkdir {stuck} && echo data > {stuck}/data"], timeout=30)
    assert planted.exit_code == 0, planted.stderr
    make_read_only(operator_driver, stuck)
    try:
        # When access is revoked
        failed = access.revoke(account, scratch=(SCRATCH,))

        # Then it fails saying which file is left, and the account stays, locked: the node is not clean
        assert failed.exit_code == 1
        assert f"{stuck}/data" in failed.stderr and "not clean" in failed.stderr, failed.stderr
        assert access.show(account)["exists"] is True
        assert access.show(account)["authorized_keys"] == []
    finally:
        operator_driver.run(["umount", stuck], timeout=30)

    # And once the mount is gone, revoking again completes the work
    again = access.revoke(account, scratch=(SCRATCH,))
    assert again.exit_code == 0, again.stderr
    assert files_of(operator_driver, uid, account) == []
    assert sshd.entry("passwd", account) is None


def test_a_process_left_on_the_gpus_fails_the_revocation_until_it_is_gone(
    access, sshd, operator_driver, account, make_ssh_key, gpus
):
    # Given a node whose card is held by a process the tenant's revocation cannot kill (another account's)
    access.grant(account, make_ssh_key())
    held = operator_driver.run(
        ["sh", "-c", f"setsid sleep 600 3<{FAKE_CARD} </dev/null >/dev/null 2>&1 & echo $!"], timeout=30
    )
    holder = int(held.stdout.strip())
    try:
        # When access is revoked
        failed = access.revoke(account)

        # Then it fails naming the process on the GPUs, and the account is kept
        assert failed.exit_code == 1
        assert f"pid {holder}" in failed.stderr and "GPUs" in failed.stderr, failed.stderr
        assert sshd.entry("passwd", account) is not None
    finally:
        os.kill(holder, 9)

    # And once the card is free, revoking again completes it
    again = access.revoke(account)
    assert again.exit_code == 0, again.stderr
    assert sshd.entry("passwd", account) is None


def test_a_scratch_folder_that_is_missing_fails_the_revocation_saying_so(access, sshd, account, make_ssh_key):
    access.grant(account, make_ssh_key())

    failed = access.revoke(account, scratch=("/run/no-such-scratch",))

    assert failed.exit_code == 1
    assert "/run/no-such-scratch does not exist" in failed.stderr, failed.stderr
    assert sshd.entry("passwd", account) is not None


def node_tool():
    """The access tool as a module (it runs on nodes, outside Django), to ask it about scratch folders."""
    spec = importlib.util.spec_from_file_location("node_access_tool", node_tools.DIRECTORY / "access.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_scratch_folder_shared_with_other_machines_or_that_is_a_link_is_refused_never_swept(tmp_path):
    # Given a scratch folder on a network filesystem (uids are unique per node only: another machine's tenant
    # may own files there under the same number), and one that is a link
    tool = node_tool()
    mountinfo = f"27 1 254:0 / / rw - ext4 /dev/vda rw\n42 27 0:50 / {tmp_path} rw - nfs4 10.0.0.9:/scratch rw\n"
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")

    # Then neither is swept, each saying why; the same folder on the node's own disk is
    with pytest.raises(tool.Failed, match="is on nfs4, not one of this node's own"):
        tool.scratch_roots([str(tmp_path)], mountinfo)
    with pytest.raises(tool.Failed, match="is not a folder"):
        tool.scratch_roots([str(tmp_path / "link")], mountinfo.replace("nfs4", "xfs"))
    assert tool.scratch_roots([str(tmp_path)], mountinfo.replace("nfs4", "xfs")) == [str(tmp_path)]


def test_an_account_gets_no_subordinate_uids_a_later_account_could_inherit(access, sshd, account, make_ssh_key):
    # Given a node whose useradd hands out subordinate ids (login.defs SUB_UID_COUNT, an /etc/subuid file):
    # a rootless container (newuidmap) would own files and run processes under those numbers, outside the
    # account's uid and its sweep, and userdel frees the range for the next account
    assert sshd.etc("subuid").exists()

    # When an account is made
    assert access.grant(account, make_ssh_key()).exit_code == 0

    # Then it has none
    assert sshd.entry("subuid", account) is None
    assert sshd.entry("subgid", account) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="files and processes of another uid need root")
def test_what_runs_and_lies_under_subordinate_uids_an_older_useradd_gave_goes_too(access, sshd, account, make_ssh_key):
    # Given an account an earlier version made with subordinate uids (its rootless containers' numbers), a
    # file and a process under one of them (made here as root: newuidmap is not installed on this machine)
    access.grant(account, make_ssh_key())
    first = 700_000_000 + int(account[2:], 16) % 1_000_000 * 100
    with open(sshd.etc("subuid"), "a") as handle:
        handle.write(f"{account}:{first}:65536\n")
    container_file = Path(f"/tmp/{account}-container-layer")
    container_file.write_text("a layer of the tenant's image")
    os.chown(container_file, first + 1000, first + 1000)
    sleeper = subprocess.Popen(
        ["setpriv", f"--reuid={first + 1000}", "--regid=65534", "--clear-groups", "sleep", "600"]
    )

    # When access is revoked
    revoked = access.revoke(account)

    # Then both are gone with the account
    assert revoked.exit_code == 0, revoked.stderr
    assert not container_file.exists()
    assert sleeper.wait(timeout=10) == -9
    assert sshd.entry("subuid", account) is None


def test_a_revocation_cut_short_after_userdel_is_finished_by_the_next_one(
    access, sshd, operator_driver, account, make_ssh_key
):
    # Given a revocation that stopped on a file it could not remove, then lost the account (userdel ran,
    # as a revocation killed right after it would leave things), with the tenant's files still on the node
    key = make_ssh_key()
    access.grant(account, key)
    uid = uid_of(sshd, account)
    stuck = f"{SCRATCH}/{account}-stuck"
    with login(sshd, account, key) as session:
        planted = session.run(["sh", "-c", f"mkdir {stuck}; echo w > {stuck}/w; echo t > /tmp/{account}-t"], timeout=30)
    assert planted.exit_code == 0, planted.stderr
    make_read_only(operator_driver, stuck)
    assert access.revoke(account, scratch=(SCRATCH,)).exit_code == 1
    operator_driver.run(["umount", stuck], timeout=30)
    subprocess.run(["userdel", "--prefix", str(sshd.sandbox), account], check=True, capture_output=True)
    assert sshd.entry("passwd", account) is None and files_of(operator_driver, uid, account)

    # When access is revoked again
    again = access.revoke(account, scratch=(SCRATCH,))

    # Then the recorded uid's files are swept all the same, and the revocation is over
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["existed"] is True
    assert files_of(operator_driver, uid, account) == []
    assert json.loads(access.revoke(account).stdout)["existed"] is False
