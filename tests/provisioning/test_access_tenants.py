"""One tenant after another on the same node: what the first left behind is gone, and the next account never
gets a uid that owned files before (a reused uid reads whatever the last tenant left readable to itself)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from provisioning import node_tools
from tests.provisioning.conftest import login

# What a tenant may leave in the node's shared temporary folders, as the shell commands it types.
LEFT_BEHIND = """
set -e
echo weights > /tmp/{tag}-file; chmod 600 /tmp/{tag}-file
mkdir /tmp/{tag}-dir; echo secret > /tmp/{tag}-dir/inner; mkdir -p /tmp/{tag}-dir/a/b/c; touch /tmp/{tag}-dir/a/b/c/deep
echo cache > /var/tmp/{tag}-cache
echo segment > /dev/shm/{tag}-shm
ln -s /etc/hostname /tmp/{tag}-link
mkfifo /tmp/{tag}-fifo
"""


def paths_left(tag: str) -> list[str]:
    candidates = [f"/tmp/{tag}-file", f"/tmp/{tag}-dir", f"/var/tmp/{tag}-cache", f"/dev/shm/{tag}-shm"]
    return [path for path in [*candidates, f"/tmp/{tag}-link", f"/tmp/{tag}-fifo"] if os.path.lexists(path)]


def uid_of(sshd, account: str) -> int:
    return int(sshd.entry("passwd", account)[2])


def test_revoking_removes_what_the_tenant_left_in_tmp_var_tmp_and_dev_shm(access, sshd, account, make_ssh_key):
    # Given a tenant who left files, a folder tree, a link to a system file and a fifo in the shared folders
    key = make_ssh_key()
    assert access.grant(account, key).exit_code == 0
    with login(sshd, account, key) as session:
        left = session.run(["sh", "-c", LEFT_BEHIND.format(tag=account)], timeout=30)
    assert left.exit_code == 0, left.stderr
    assert len(paths_left(account)) == 6

    # When access is revoked
    revoked = access.revoke(account)

    # Then nothing of it is left, and the link was removed, never followed
    assert revoked.exit_code == 0, revoked.stderr
    assert paths_left(account) == []
    assert Path("/etc/hostname").exists()


def test_the_next_account_never_gets_a_uid_that_was_handed_out_before(access, sshd, account, make_ssh_key):
    # Given two tenants, one after the other, both revoked (the newest first)
    first, second = account, account + "-b"
    access.grant(first, make_ssh_key())
    access.grant(second, make_ssh_key())
    used = {uid_of(sshd, first), uid_of(sshd, second)}
    access.revoke(second)
    access.revoke(first)

    # When the next tenant's account is made
    third = account + "-c"
    assert access.grant(third, make_ssh_key()).exit_code == 0

    # Then its uid (and its group's gid) is above every uid handed out before: nothing on disk is its own
    passwd = sshd.entry("passwd", third)
    assert int(passwd[2]) > max(used), (passwd, used)
    assert int(passwd[3]) == int(passwd[2])


def sweep(root: Path, uid: int, mount: str = "") -> subprocess.CompletedProcess:
    """The access tool's sweep of one filesystem, run on a tree of this test (in a private mount namespace
    when a folder of the tree gets a filesystem of its own)."""
    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(node_tools.DIRECTORY)!r})
        import access
        print(json.dumps(access.remove_owned({str(root)!r}, {uid})))
        """
    )
    command = [sys.executable, "-c", code]
    if mount:
        script = (
            f"mount -t tmpfs sweep-test {mount} && touch {mount}/theirs && chown {uid} {mount}/theirs"
            f' && "$@" && ls {mount}'  # what the other filesystem holds after the sweep
        )
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_the_sweep_never_follows_links_nor_crosses_into_another_filesystem(tmp_path):
    # Given a tree with the uid's files, its folder holding a root file, and its link to a file outside
    uid = 4_000_000_123
    outside = tmp_path / "outside"
    outside.write_text("not in the tree")
    os.chown(outside, uid, uid)
    tree = tmp_path / "tree"
    (tree / "theirs-dir" / "sub").mkdir(parents=True)
    (tree / "theirs-dir" / "sub" / "root-file").write_text("root's")
    os.chown(tree / "theirs-dir", uid, uid)
    (tree / "kept").mkdir()
    (tree / "kept" / "theirs").write_text("x")
    os.chown(tree / "kept" / "theirs", uid, uid)
    (tree / "kept" / "root-file").write_text("root's")
    (tree / "link").symlink_to(outside)
    os.lchown(tree / "link", uid, uid)
    (tree / "mnt").mkdir()

    # When the sweep runs, with another filesystem mounted inside the tree
    result = sweep(tree, uid, mount=str(tree / "mnt"))

    # Then the uid's entries are gone, the link without its target, and the other filesystem was left alone
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "theirs"  # on the filesystem mounted inside: not walked
    assert sorted(p.name for p in tree.iterdir()) == ["kept", "mnt"]
    assert sorted(p.name for p in (tree / "kept").iterdir()) == ["root-file"]
    assert outside.read_text() == "not in the tree"


def node_tool():
    """The access tool as a module (it runs on nodes, outside Django), to ask it what it would sweep."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("node_access_tool", node_tools.DIRECTORY / "access.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MOUNTINFO = r"""
22 27 0:21 / /proc rw,relatime - proc proc rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334096k,mode=755
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683568k
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 254:0 /srv/data /mnt/bound rw,relatime - ext4 /dev/vda rw,discard
41 27 259:1 / /scratch\040space rw,noatime shared:5 - xfs /dev/nvme0n1 rw
42 27 0:50 / /datasets rw,relatime - nfs4 10.0.0.9:/datasets rw,vers=4.2
43 27 0:51 / /team rw,relatime - cifs //nas/team rw
44 27 0:52 / /home/remote rw,nosuid - fuse.sshfs user@host: rw
45 27 259:2 / /opt/images ro,relatime - ext4 /dev/nvme1n1 ro
46 27 0:53 / /lustre rw - lustre 10.0.0.8@tcp:/fs rw
"""


def test_only_the_nodes_own_writable_filesystems_are_swept_never_a_network_mount():
    # Given a node's mounts: its disks, memory filesystems, a bind mount, network shares, a read-only image
    # When the access tool picks what to sweep at a revocation
    mounts = node_tool().local_mounts(MOUNTINFO)

    # Then it walks its local writable filesystems (a filesystem's root before a bind mount of a folder of it)
    assert mounts == ["/dev/shm", "/", "/scratch space", "/mnt/bound"]
