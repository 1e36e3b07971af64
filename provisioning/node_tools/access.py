#!/usr/bin/env python3
"""Per-order SSH access on a GPU node. Runs ON the node as root, with the standard library only.

    python3 access.py grant  --account o-b2k4mq9xd --key-file key.pub --expires 2025-07-01T12:00:00Z
    python3 access.py revoke --account o-b2k4mq9xd
    python3 access.py show   --account o-b2k4mq9xd
    python3 access.py rekey  --account o-b2k4mq9xd --key-file new.pub
    python3 access.py grace  --account o-b2k4mq9xd --until 2025-07-01T12:00:00Z
    python3 access.py sshd-check --account o-b2k4mq9xd
    python3 access.py notice --account o-b2k4mq9xd --ends-at 2025-07-01T12:00:00Z --reason end --grace-seconds 120
    python3 access.py probe-key --account o-b2k4mq9xd --key-file probe.pub --minutes 10
    python3 access.py probe-key --account o-b2k4mq9xd --remove

Each prints one JSON object on stdout. Exit status: 0 done, 1 failed, 2 usage error, 3 refused
(the account exists but is not one of ours, or it is bound to another key), 4 the key is refused (not
exactly one whole public key of a known type: the caller's input, the node is fine).

grant: a Linux account named after the order (useradd: home /home/ACCOUNT, shell /bin/bash, no
password, account expiry the day after the end), its ~/.ssh/authorized_keys holding exactly the
customer's key (type and data, read as UTF-8, parsed in full) behind OpenSSH's
expiry-time="YYYYMMDDHHMMZ" option; ~/.ssh 700, the file 600, both owned by the account. The key is
bound to the account for its whole term (recorded in the account's comment field): granting again with
it only refreshes the expiry; another key is refused (`rekey` replaces it). Its uid (and its group's
gid) is above every uid
ever handed out on this node (the high-water mark in /var/lib/b200-access/uid-high-water) and every id
in use: a uid is never reused, so a new account never owns what an old one left. It gets no subordinate
ids (/etc/subuid): a rootless container would run and write under numbers outside its uid.
revoke [--scratch DIR ...]: the end of the rental, proven clean. Expire the account, remove its key, kill
its processes (by uid, and by the subordinate uids an earlier version gave it, again until none is left),
remove every file they own on the node's local writable filesystems and in each --scratch folder (find -P
-xdev: links are removed, never followed; network and read-only mounts never walked), their System V
shared memory, queues and semaphores, then check that no
process is left on the GPUs (nvidia-smi; a node without it has no cards to check). Only when all of that
is done are the account and its home removed; otherwise it exits 1 saying what is left, the account stays
(locked) and the next revoke finishes the work. The uid is recorded under the state folder until the
revocation is complete, so a revoke cut short after userdel still knows whose files to look for.
Both commands are idempotent.
rekey --key-file F [--expires T]: the customer replaced their key. The account (ours, not being revoked)
is bound to the new key (its comment field) and authorized_keys holds exactly it, behind the same
expiry-time option as before (or T); the old key is gone. Written as grant writes it (no link followed,
owned by the account). Idempotent; exit 4 for a refused key, 3 for an account that is not ours.

grace --until T: the rental ended, the data window opens until T (the clean end, revoke, follows then). The
files stay; the account's processes are killed, its System V IPC removed, the cards proven free of its work,
its crontab and at jobs moved into the state folder (never run), its login shell made /bin/sh (which reads no
startup file of the tenant's) and its key limited to read-only SFTP:
restrict,command="<sftp-server> -R",expiry-time="T". Exit 1 when no sftp-server is installed, or when IPC or
GPU work is left. A grant again (an extension applied in the window) gives the whole login back. Idempotent.

Where sshd reads the keys (issue 39): the tenant owns its home and ~/.ssh, so a key file there is one it can
rewrite at any time (a loop that puts its unrestricted key back during the data window, a second key that
outlives a rekey). The tool therefore keeps the account's key in a file only root writes,
/etc/ssh/authorized_keys/ACCOUNT (root-owned, readable by the account's group alone), and the node's sshd must
read that file and nothing in the home: `AuthorizedKeysFile /etc/ssh/authorized_keys/%u` (docs/production.md).
It also writes ~/.ssh/authorized_keys and removes ~/.ssh/authorized_keys2, for a node whose sshd still reads
the home (OpenSSH's stock setting), though such a node never gets a rental: the shop checks the node first.
sshd-check: `sshd -T` for the account, and whether its configuration lets a tenant add keys (a key file in
the home, one in a folder others may write, an AuthorizedKeysCommand the tool cannot judge) or does not read
the file this tool writes. Prints {"ok": ..., "authorized_keys_file": [...], "problems": [...]}; the shop's
node check refuses the node when it is not ok.

notice --ends-at T --reason end|move|maintenance [--grace-seconds N]: the notice before the processes stop
(issue 41): ~/.b200/notice.json ({"ends_at", "reason", "seconds_left"}), written as the tool writes every file in
the home (no link followed, replaced whole, owned by the account), and a line on each terminal the account owns.
revoke and grace take --term-seconds N: the account's processes get SIGTERM first (a training loop that saves a
checkpoint on it keeps it into the data window), SIGKILL N seconds later; the door is closed before, so the
wait ends.

probe-key --key-file F --minutes M | --remove: the hand-over's proof (issue 41). Before the rental clock starts the
shop logs in as the account, over SSH, SFTP and SCP, with an ed25519 key of its own made for that one proof (it
never holds the customer's private key). probe-key adds that key as ONE more line after the customer's, in the held
file and the home's copy: restrict,expiry-time="<now + M minutes>" ssh-ed25519 DATA b200-handover-probe (no pty,
no forwarding, gone by itself after M minutes, 1 to 60). --remove takes every probe line out again; every other line
stays byte for byte. Refused (3) for an account that is not ours, being revoked or in its data window; the key file
is parsed as grant parses it (4 when it is not exactly one ed25519 public key); no link is followed. grant, rekey and
grace write the customer's key alone, which drops a probe line: --remove after them has nothing to do (idempotent).

--users-prefix DIR works on DIR/etc/{passwd,shadow,group,...} (useradd --prefix) with homes under
DIR/home and the state under DIR/var/lib: the test suite's sandbox, where revoke sweeps only /tmp,
/var/tmp, /dev/shm and the --scratch folders (the machine's other filesystems are not the node's). In
production there is no prefix: real accounts on the node.
"""

# The node may run an older Python than the shop: keep this file to Python 3.8.
# ruff: noqa: UP017, S603, S108 - S108: the shared temp folders are swept here, never written

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the node's Python may be 3.8: these shapes (the JSON printed) are for the type checker only
    from typing import NotRequired, TypedDict

    class Entry(TypedDict):
        """An account of the user database."""

        uid: int
        gid: int
        gecos: str
        home: str
        shell: str

    class NamedEntry(Entry):
        name: str

    class Shadow(TypedDict):
        password: str  # "empty", "none" or "set"
        account_expires: str | None

    class Sweep(TypedDict):
        root: str
        removed: int
        left: list[str]

    class GpuCheck(TypedDict):
        checked: bool
        left: list[str]
        why: NotRequired[str]

    class Scrubbed(TypedDict):
        processes_terminated: int
        processes_killed: int
        files_removed: int
        swept: list[str]
        gpus: str

    class Granted(TypedDict):
        account: str
        uid: int
        home: str
        expires: str
        account_expires: str
        key_fingerprint: str
        created: bool
        changed: bool

    class Rekeyed(TypedDict):
        account: str
        key_fingerprint: str
        expires: str
        changed: bool

    class ProbeAdded(TypedDict):
        account: str
        probe_fingerprint: str
        expiry_time: str

    class ProbeRemoved(TypedDict):
        account: str
        existed: bool
        removed: int

    class Revoked(TypedDict):
        account: str
        existed: bool
        removed: bool
        processes_killed: int
        uid: NotRequired[int]
        processes_terminated: NotRequired[int]
        files_removed: NotRequired[int]
        swept: NotRequired[list[str]]
        gpus: NotRequired[str]
        files_left: NotRequired[list[str]]

    class Graced(TypedDict):
        account: str
        existed: bool
        changed: NotRequired[bool]
        until: NotRequired[str]
        sftp_server: NotRequired[str]
        processes_terminated: NotRequired[int]
        processes_killed: NotRequired[int]
        jobs_held: NotRequired[list[str]]
        gpus: NotRequired[str]

    class Installed(TypedDict):
        installed: str
        modules: int

    class OrderState(TypedDict):
        account: str
        written: str

    class NoticeBody(TypedDict):
        ends_at: str
        reason: str
        seconds_left: int

    class Noticed(TypedDict):
        account: str
        existed: bool
        notice: NotRequired[NoticeBody]
        terminals: NotRequired[int]

    class ShownKey(TypedDict):
        type: str
        fingerprint: str
        expiry_time: str | None

    class Shown(TypedDict):
        account: str
        exists: bool
        managed: NotRequired[bool]
        uid: NotRequired[int]
        home: NotRequired[str]
        home_exists: NotRequired[bool]
        bound_key: NotRequired[str | None]
        password: NotRequired[str | None]
        account_expires: NotRequired[str | None]
        authorized_keys: NotRequired[list[ShownKey]]

    class SshdCheck(TypedDict):
        ok: bool
        account: str
        authorized_keys_file: list[str]
        problems: list[str]


ACCOUNT = re.compile(r"^[a-z][a-z0-9-]{1,30}$")
MARKER = "b200-shop order access"  # the start of the comment field of every account this tool manages
KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
FIRST_UID = 1000
# nobody/nogroup (65534) and the invalid 16-bit (uid_t)-1 (65535) are never a high-water mark.
NOBODY_ID = 65534
# The highest uid ever handed out (under --users-prefix in the sandbox): a uid is never reused, so no new
# account can own what an old one left anywhere.
STATE_DIR = "/var/lib/b200-access"
# The node's shared writable folders (on a node, swept with the rest of their filesystems; in the sandbox,
# the only folders swept).
SHARED_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# Filesystems on the node's own disks or memory. Anything else (nfs, cifs, fuse.*, ceph, lustre...) may be
# shared with other machines and is never walked.
LOCAL_FILESYSTEMS = frozenset(
    ("ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "jfs", "reiserfs", "vfat", "exfat", "tmpfs", "ramfs")
    + ("overlay", "mqueue")
)
TOOL_PATH = os.pathsep.join(["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"])


class Refused(Exception):
    """The request is understood but must not be carried out (exit 3)."""


class KeyRefused(Refused):
    """The caller's key itself is refused: its input, not the node (exit 4)."""


class Failed(Exception):
    """Something on the node went wrong (exit 1)."""


# Input ------------------------------------------------------------------------------------------


def check_account(name: str) -> str:
    if not ACCOUNT.match(name or ""):
        raise argparse.ArgumentTypeError(f"invalid account name {name!r}: expected ^[a-z][a-z0-9-]{{1,30}}$")
    return name


def parse_expires(text: str) -> dt.datetime:
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid --expires {text!r}: expected ISO 8601, e.g. 2025-07-01T12:00Z"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"--expires {text!r} has no time zone: add Z or an offset")
    return moment.astimezone(dt.timezone.utc)


def read_public_key(path: str) -> tuple[str, str]:
    """(type, base64) of the single OpenSSH public key in the file; options and extra keys are refused.

    The file is UTF-8 (a comment may be `josé@laptop`); only the type and the key data are installed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise Failed(f"cannot read the key file {path}: {error}") from error
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise KeyRefused("the key file is not a regular file")
        raw = os.read(fd, 16384)
    finally:
        os.close(fd)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyRefused("the key file is not UTF-8 text") from None
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if len(lines) != 1:
        raise KeyRefused(f"the key file must hold exactly one public key, it holds {len(lines)} lines")
    fields = lines[0].split()
    if len(fields) < 2 or fields[0] not in KEY_TYPES:
        raise KeyRefused("the key must be a plain OpenSSH public key line (TYPE BASE64 [comment]), without options")
    key_type, data = fields[0], fields[1]
    try:
        blob = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise KeyRefused("the key's base64 part is not valid") from None
    check_key_blob(key_type, blob)
    return key_type, data


# The NIST curves of OpenSSH's ECDSA types: (name, field prime p, b); a = -3 on all three.
CURVES = {
    "ecdsa-sha2-nistp256": (
        "nistp256",
        2**256 - 2**224 + 2**192 + 2**96 - 1,
        0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B,
    ),
    "ecdsa-sha2-nistp384": (
        "nistp384",
        2**384 - 2**128 - 2**96 + 2**32 - 1,
        0xB3312FA7E23EE7E4988E056BE3F82D19181D9C6EFE8141120314088F5013875AC656398D8A2ED19D2A85C8EDD3EC2AEF,
    ),
    "ecdsa-sha2-nistp521": (
        "nistp521",
        2**521 - 1,
        int(
            "0051953EB9618E1C9A1F929A21A0B68540EEA2DA725B99B315F3B8B489918EF1"
            "09E156193951EC7E937B1652C0BD3BB1BF073573DF883D2C34F1EF451FD46B503F00",
            16,
        ),
    ),
}
CURVES["sk-ecdsa-sha2-nistp256@openssh.com"] = CURVES["ecdsa-sha2-nistp256"]
MIN_RSA_BITS = 2048


def ssh_strings(blob: bytes) -> list[bytes]:
    """The length-prefixed strings a key blob is made of; a blob cut short is refused."""
    fields: list[bytes] = []
    at = 0
    while at < len(blob):
        if at + 4 > len(blob):
            raise KeyRefused("the key's data is cut short")
        size = int.from_bytes(blob[at : at + 4], "big")
        if at + 4 + size > len(blob):
            raise KeyRefused("the key's data is cut short")
        fields.append(blob[at + 4 : at + 4 + size])
        at += 4 + size
    return fields


def on_curve(key_type: str, point: bytes) -> bool:
    """An uncompressed point (0x04 | x | y) that satisfies y^2 = x^3 - 3x + b over the curve's field."""
    _name, p, b = CURVES[key_type]
    size = (p.bit_length() + 7) // 8
    if len(point) != 1 + 2 * size or point[0] != 4:
        return False
    x, y = int.from_bytes(point[1 : 1 + size], "big"), int.from_bytes(point[1 + size :], "big")
    return x < p and y < p and (y * y - (x * x * x - 3 * x + b)) % p == 0


def check_key_blob(key_type: str, blob: bytes) -> None:
    """The key's data is a whole key of its type, nothing more or less (sshd would not use it otherwise)."""
    fields = ssh_strings(blob)
    if not fields or fields[0] != key_type.encode():
        raise KeyRefused(f"the key's data does not match its type {key_type}")
    parts = fields[1:]
    if key_type in ("ssh-ed25519", "sk-ssh-ed25519@openssh.com"):
        expected = 2 if key_type.startswith("sk-") else 1  # security keys end with their application string
        sound = len(parts) == expected and len(parts[0]) == 32
    elif key_type in CURVES:
        expected = 3 if key_type.startswith("sk-") else 2
        sound = len(parts) == expected and parts[0] == CURVES[key_type][0].encode() and on_curve(key_type, parts[1])
    else:  # ssh-rsa: exponent and modulus, positive integers
        sound = len(parts) == 2 and all(part and not part[0] & 0x80 for part in parts)
        if sound and int.from_bytes(parts[1], "big").bit_length() < MIN_RSA_BITS:
            raise KeyRefused(f"RSA keys need at least {MIN_RSA_BITS} bits")
    if not sound:
        raise KeyRefused(f"the key's data is not a whole {key_type} key (damaged or incomplete)")


def fingerprint(data: str) -> str:
    digest = hashlib.sha256(base64.b64decode(data)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


# The user database -----------------------------------------------------------------------------


class Users:
    """The account database and homes, optionally under a prefix (the test sandbox)."""

    def __init__(self, prefix: str) -> None:
        prefix = (prefix or "").rstrip("/")
        if prefix and not (os.path.isabs(prefix) and os.path.isfile(prefix + "/etc/passwd")):
            raise Failed(f"--users-prefix {prefix}: no etc/passwd there")
        if prefix and os.environ.get("SUDO_UID", "0") != "0":
            only_root_writes(prefix + "/etc/passwd")
        self.prefix = prefix

    def path(self, path: str) -> str:
        return self.prefix + path

    def lookup(self, account: str) -> Entry | None:
        if not self.prefix:
            try:
                entry = pwd.getpwnam(account)
            except KeyError:
                return None
            return {
                "uid": entry.pw_uid,
                "gid": entry.pw_gid,
                "gecos": entry.pw_gecos,
                "home": entry.pw_dir,
                "shell": entry.pw_shell,
            }
        for fields in _records(self.path("/etc/passwd")):
            if len(fields) >= 7 and fields[0] == account:
                return {
                    "uid": int(fields[2]),
                    "gid": int(fields[3]),
                    "gecos": fields[4],
                    "home": fields[5],
                    "shell": fields[6],
                }
        return None

    def shadow(self, account: str) -> Shadow | None:
        for fields in _records(self.path("/etc/shadow")):
            if len(fields) >= 8 and fields[0] == account:
                expires = None
                if fields[7].strip():
                    expires = (dt.date(1970, 1, 1) + dt.timedelta(days=int(fields[7]))).isoformat()
                return {"password": _password_state(fields[1]), "account_expires": expires}
        return None

    def tool(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        program = shutil.which(name, path=TOOL_PATH)
        if program is None:
            raise Failed(f"{name} is not installed on this node")
        prefix = ["--prefix", self.prefix] if self.prefix else []
        return subprocess.run([program, *prefix, *args], capture_output=True, text=True, timeout=120, check=False)


def only_root_writes(path: str) -> None:
    """Run through sudo by a login that is not root, the tool must not trust a user database that login
    could have written (its entries could name any uid, whose processes and files a revocation removes):
    every folder from / down to the file is a real folder owned by root that nobody else may write into
    (a sticky folder such as /tmp excepted), and so is the file."""
    current = "/"
    for part in [part for part in path.split("/") if part]:
        current = os.path.join(current, part)
        info = os.lstat(current)
        sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX and current != path
        writable_by_others = info.st_mode & 0o022 and not sticky
        if stat.S_ISLNK(info.st_mode) or info.st_uid != 0 or writable_by_others:
            raise Failed(f"--users-prefix: {current} is not a root-owned path that only root writes into")


def _records(path: str) -> Iterator[list[str]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                yield line.rstrip("\n").split(":")
    except FileNotFoundError:
        return


def _password_state(field: str) -> str:
    if field == "":
        return "empty"  # would allow login without a password: never created by this tool
    if field.startswith(("!", "*")) or field in ("x", "LK", "NP"):
        return "none"
    return "set"


def managed(entry: Entry) -> bool:
    return entry["gecos"].startswith(MARKER) and entry["uid"] >= FIRST_UID


def bound_key(entry: Entry) -> str:
    """The fingerprint recorded when the account was created (passwd fields cannot hold ':')."""
    rest = entry["gecos"][len(MARKER) :].strip()
    return "SHA256:" + rest[len("key=") :] if rest.startswith("key=") else ""


def account_expiry_day(expires: dt.datetime) -> str:
    """The day the account itself expires: the first day after the end (shadow counts whole days)."""
    day = expires.date()
    if expires.time() != dt.time(0, 0):
        day += dt.timedelta(days=1)
    return day.isoformat()


# Files in the account's home, written as root into directories the account owns: never follow links.


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def _real_dir(home_fd: int, name: str) -> int:
    """~/NAME as a real directory (a link or file the account put there is removed first)."""
    try:
        return _open_dir(name, home_fd)
    except FileNotFoundError:
        pass
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        os.unlink(name, dir_fd=home_fd)
    os.mkdir(name, 0o700, dir_fd=home_fd)
    return _open_dir(name, home_fd)


def _ssh_dir(home_fd: int) -> int:
    return _real_dir(home_fd, ".ssh")


@contextlib.contextmanager
def _owned_ssh_dir(home: str, entry: Entry) -> Iterator[int]:
    """The account's ~/.ssh, opened without following a link, it and the home owned by the account and closed
    to everyone else (no other customer reads this home)."""
    home_fd = _open_dir(home)
    try:
        os.fchown(home_fd, entry["uid"], entry["gid"])
        os.fchmod(home_fd, 0o700)
        ssh_fd = _ssh_dir(home_fd)
        try:
            os.fchown(ssh_fd, entry["uid"], entry["gid"])
            os.fchmod(ssh_fd, 0o700)
            yield ssh_fd
        finally:
            os.close(ssh_fd)
    finally:
        os.close(home_fd)


def _read_authorized_keys(ssh_fd: int) -> str | None:
    try:
        fd = os.open("authorized_keys", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=ssh_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            return ""
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, 1 << 20).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


# Key files OpenSSH reads by default besides authorized_keys (`AuthorizedKeysFile .ssh/authorized_keys
# .ssh/authorized_keys2`): a key the tenant planted there would outlive a rekey and the data window (issue 39).
OTHER_KEY_FILES = ("authorized_keys2",)


def _other_key_files_remove(ssh_fd: int) -> list[str]:
    """Remove every key file of ~/.ssh that sshd may read other than the one this tool writes (a link or a file,
    never followed; a folder there is no key file to sshd). Returns the names removed."""
    removed = []
    for name in OTHER_KEY_FILES:
        try:
            info = os.stat(name, dir_fd=ssh_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=ssh_fd)
            removed.append(name)
    return removed


def _write_authorized_keys(ssh_fd: int, content: str, uid: int, gid: int) -> None:
    partial = f".authorized_keys.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial, dir_fd=ssh_fd)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=ssh_fd)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o600)
        os.write(fd, content.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, "authorized_keys", src_dir_fd=ssh_fd, dst_dir_fd=ssh_fd)


# The key sshd reads: a file per account that only root writes (AuthorizedKeysFile /etc/ssh/authorized_keys/%u).
HELD_KEYS_DIR = "/etc/ssh/authorized_keys"


def _held_keys_dir(users: Users) -> int:
    """The folder of held keys, made when missing; refused unless it and every folder above it are root's
    alone (a folder someone else writes into could swap a key file)."""
    path = users.path(HELD_KEYS_DIR)
    if not os.path.lexists(path):
        os.makedirs(path, 0o755, exist_ok=True)
    only_root_writes(path)
    return _open_dir(path)


def held_key_read(users: Users, account: str) -> str | None:
    """The account's key file that sshd reads (None when there is none)."""
    try:
        keys_fd = _open_dir(users.path(HELD_KEYS_DIR))
    except FileNotFoundError:
        return None
    try:
        fd = os.open(account, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=keys_fd)
    except FileNotFoundError:
        return None
    finally:
        os.close(keys_fd)
    try:
        return os.read(fd, 1 << 20).decode("utf-8", errors="replace") if stat.S_ISREG(os.fstat(fd).st_mode) else ""
    finally:
        os.close(fd)


def held_key_write(users: Users, account: str, content: str, gid: int) -> None:
    """Written whole (a partial file renamed over it), root's, readable by the account's group only."""
    keys_fd = _held_keys_dir(users)
    try:
        partial = f".{account}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial, dir_fd=keys_fd)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=keys_fd)
        try:
            os.fchown(fd, 0, gid)
            os.fchmod(fd, 0o640)
            os.write(fd, content.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, account, src_dir_fd=keys_fd, dst_dir_fd=keys_fd)
    finally:
        os.close(keys_fd)


def held_key_remove(users: Users, account: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(users.path(HELD_KEYS_DIR), account))


def _keys_write(users: Users, ssh_fd: int, entry: Entry, account: str, line: str) -> bool:
    """The one key line in the held file and in ~/.ssh/authorized_keys; True when either changed."""
    changed = False
    if held_key_read(users, account) != line:
        held_key_write(users, account, line, entry["gid"])
        changed = True
    if _read_authorized_keys(ssh_fd) != line:
        _write_authorized_keys(ssh_fd, line, entry["uid"], entry["gid"])
        changed = True
    return changed


# Uids: a high-water mark, never a reuse ----------------------------------------------------------


@contextlib.contextmanager
def state_locked(users: Users) -> Iterator[str]:
    """The node's access state, locked against a concurrent grant (the same order delivered twice)."""
    directory = users.path(STATE_DIR)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory
    finally:
        os.close(fd)


def _ids_in_use(users: Users) -> list[int]:
    """Every uid and gid of the user database (and, on a real node, of NSS) in the accounts' range."""
    ids = [
        int(fields[2])
        for name in ("/etc/passwd", "/etc/group")
        for fields in _records(users.path(name))
        if len(fields) > 2 and fields[2].isdigit()
    ]
    if not users.prefix:
        ids += [entry.pw_uid for entry in pwd.getpwall()]
    return [value for value in ids if FIRST_UID <= value < NOBODY_ID or value > NOBODY_ID + 1]


def uid_next(users: Users, directory: str) -> int:
    """Above every uid and gid ever handed out here or in use now; recorded before it is used."""
    path = os.path.join(directory, "uid-high-water")
    try:
        with open(path, encoding="ascii") as handle:
            high = int(handle.read().strip() or 0)
    except FileNotFoundError:
        high = 0
    uid = max([high, FIRST_UID - 1, *_ids_in_use(users)]) + 1
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w", encoding="ascii") as handle:
        handle.write(f"{uid}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    return uid


class Ids:
    """The numbers an account's processes and files run and are owned under: its uid, and the subordinate
    ranges an earlier version's useradd gave it (a rootless container, through newuidmap, runs and writes as
    those; userdel then frees them for the next account)."""

    def __init__(self, uid: int, ranges: tuple[tuple[int, ...], ...] = ()) -> None:
        self.uid = uid
        self.ranges = tuple(ranges)  # (first, count)

    def __contains__(self, number: int) -> bool:
        return number == self.uid or any(first <= number < first + count for first, count in self.ranges)

    def find_test(self) -> list[str]:
        """find's test for a file owned by one of them (-uid +N / -N: above N / below N)."""
        test = ["(", "-uid", str(self.uid)]
        for first, count in self.ranges:
            test += ["-o", "(", "-uid", f"+{first - 1}", "-uid", f"-{first + count}", ")"]
        return [*test, ")"]

    def __str__(self) -> str:
        ranges = ", ".join(f"{first}-{first + count - 1}" for first, count in self.ranges)
        return f"uid {self.uid}" + (f" (and its subordinate uids {ranges})" if ranges else "")

    def dump(self) -> str:
        return "".join([f"{self.uid}\n", *(f"{first}:{count}\n" for first, count in self.ranges)])

    @classmethod
    def load(cls, text: str) -> Ids:
        lines = text.split()
        return cls(int(lines[0]), tuple(tuple(int(part) for part in line.split(":")) for line in lines[1:]))


def subordinate_ranges(users: Users, account: str, uid: int) -> tuple[tuple[int, int], ...]:
    """The account's ranges in /etc/subuid (keyed by its name or its uid)."""
    ranges = []
    for fields in _records(users.path("/etc/subuid")):
        if len(fields) == 3 and fields[0] in (account, str(uid)) and fields[1].isdigit() and fields[2].isdigit():
            ranges.append((int(fields[1]), int(fields[2])))
    return tuple(ranges)


# Files a tenant leaves: removed wherever they are on the node's own filesystems -------------------


def _mounts(mountinfo: str) -> list[tuple[str, str, list[str], bool]]:
    """(mount point, filesystem type, options) of each line of /proc/self/mountinfo, in its order."""
    mounts = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or not tail:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), fields[4])
        mounts.append((point, tail[0], fields[5].split(","), fields[3] != "/"))
    return mounts


def local_mounts(mountinfo: str) -> list[str]:
    """Mount points of writable local filesystems in /proc/self/mountinfo, those mounting a filesystem's
    root first (a bind mount of a folder inside it is the same filesystem, swept once)."""
    mounts = [
        (bound, point)
        for point, fs_type, options, bound in _mounts(mountinfo)
        if fs_type in LOCAL_FILESYSTEMS and "ro" not in options
    ]
    return [point for _, point in sorted(mounts, key=lambda mount: mount[0])]


def filesystem_of(path: str, mountinfo: str) -> str:
    """The type of the filesystem that holds `path` (the last mount on the longest matching mount point)."""
    found, length = "", -1
    for point, fs_type, _options, _bound in _mounts(mountinfo):
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= length:
            found, length = fs_type, len(point)
    return found


def scratch_roots(paths: list[str], mountinfo: str) -> list[str]:
    """The node's configured scratch folders, each a real folder on a local filesystem: a network one may
    hold other machines' files under the same uid numbers (uids are unique per node only), never swept."""
    roots = []
    for path in paths:
        if not os.path.isabs(path):
            raise Failed(f"scratch folder {path!r} is not an absolute path: fix the node's scratch paths")
        try:
            info = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            raise Failed(
                f"scratch folder {path} does not exist on this node (its disk not mounted?): mount it, or remove "
                "it from the node's scratch paths, then revoke again"
            ) from None
        if not stat.S_ISDIR(info.st_mode):
            raise Failed(f"scratch folder {path} is not a folder (a link or a file): fix the node's scratch paths")
        fs_type = filesystem_of(os.path.realpath(path), mountinfo)
        if fs_type not in LOCAL_FILESYSTEMS:
            raise Failed(
                f"scratch folder {path} is on {fs_type or 'an unknown filesystem'}, not one of this node's own: "
                "other machines may keep files there under the same uids; remove it from the node's scratch paths"
            )
        roots.append(path)
    return roots


def sweep_roots(users: Users, scratch: list[str]) -> list[str]:
    """Where a tenant's files are looked for: every local filesystem of the node once, and each scratch folder
    on a filesystem not swept already; in the sandbox (--users-prefix) the machine's filesystems are not the
    node's, so the shared temporary folders and the scratch folders only."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        mountinfo = handle.read()
    scratch = scratch_roots(scratch, mountinfo)
    if users.prefix:
        shared = [path for path in SHARED_TEMP_DIRS if os.path.isdir(path) and not os.path.islink(path)]
        return shared + [path for path in scratch if path not in shared]
    roots, devices = [], set()
    for path in [*local_mounts(mountinfo), *scratch]:
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_dev not in devices:  # a bind mount: the same filesystem again
            devices.add(info.st_dev)
            roots.append(path)
    return roots


def _find(*args: str) -> subprocess.CompletedProcess[bytes]:
    program = shutil.which("find", path=TOOL_PATH)
    if program is None:
        raise Failed("find is not installed on this node")
    return subprocess.run([program, *args], capture_output=True, timeout=3600, check=False)


def _found(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [os.fsdecode(path) for path in result.stdout.split(b"\0") if path]


def remove_owned(root: str, ids: Ids | int) -> Sweep:
    """Remove everything under `root` owned by the ids, on root's filesystem only (-xdev), never following a
    link (-P: a link is removed, its target never touched). A folder of theirs goes with all it holds."""
    owned = (ids if isinstance(ids, Ids) else Ids(ids)).find_test()
    # -delete implies -depth (a folder's contents first) and removes each entry relative to its folder's fd.
    removed = len(_found(_find("-P", root, "-xdev", "-mindepth", "1", *owned, "-delete", "-print0")))
    # Their folders that still hold something of another owner (root wrote into them, say).
    kept = _find("-P", root, "-xdev", "-mindepth", "1", "-type", "d", *owned, "-prune", "-print0")
    for folder in _found(kept):
        removed += len(_found(_find("-P", folder, "-xdev", "-delete", "-print0")))
    left = _find("-P", root, "-xdev", "-mindepth", "1", *owned, "-print0")
    return {"root": root, "removed": removed, "left": _found(left)[:10]}


# Commands --------------------------------------------------------------------------------------


def _useradd(
    users: Users, account: str, key_fingerprint: str, expiry_day: str, uid: int
) -> subprocess.CompletedProcess[str]:
    return users.tool(
        "useradd",
        "--create-home",
        "--home-dir",
        f"/home/{account}",
        "--shell",
        "/bin/bash",
        # '*': no password can ever match, and unlike '!' sshd does not read it as a locked account
        "--password",
        "*",
        "--comment",
        f"{MARKER} key={key_fingerprint[len('SHA256:') :]}",
        "--expiredate",
        expiry_day,
        "--uid",
        str(uid),
        "--user-group",  # its group takes the same number, free too: above every gid in use
        # No subordinate ids: a rootless container would own files and run processes under numbers outside
        # the account's uid, and userdel would free them for the next account.
        "--key",
        "SUB_UID_COUNT=0",
        "--key",
        "SUB_GID_COUNT=0",
        account,
    )


def grant(users: Users, account: str, key_file: str, expires: dt.datetime) -> Granted:
    key_type, data = read_public_key(key_file)
    key_fingerprint = fingerprint(data)
    expiry_day = account_expiry_day(expires)
    entry = users.lookup(account)
    created = False
    if entry is None:
        with state_locked(users) as directory:
            entry = users.lookup(account)  # made meanwhile by a concurrent grant of the same order?
            if entry is None:
                result = _useradd(users, account, key_fingerprint, expiry_day, uid_next(users, directory))
                entry = users.lookup(account)
                if entry is None:
                    raise Failed(f"useradd {account} failed: {result.stderr.strip() or result.stdout.strip()}")
                created = result.returncode == 0
    if not managed(entry):
        raise Refused(f"the account {account} exists and was not created by this tool: not touching it")
    if bound_key(entry) != key_fingerprint:
        raise Refused(
            f"the account {account} is bound to the key {bound_key(entry) or '(unknown)'} for its whole term; "
            f"refusing to replace it with {key_fingerprint}"
        )

    changed = created
    if entry.get("shell") == GRACE_SHELL:  # granted again in its data window (an extension): a whole login again
        result = users.tool("usermod", "--shell", "/bin/bash", account)
        if result.returncode != 0:
            raise Failed(f"usermod --shell failed: {result.stderr.strip()}")
        changed = True
    shadow = users.shadow(account)
    if (shadow["account_expires"] if shadow else None) != expiry_day:
        result = users.tool("usermod", "--expiredate", expiry_day, account)
        if result.returncode != 0:
            raise Failed(f"usermod --expiredate failed: {result.stderr.strip()}")
        changed = True

    home = users.path(entry["home"])
    line = f'expiry-time="{expires.strftime("%Y%m%d%H%M")}Z" {key_type} {data}\n'
    if not os.path.lexists(home):
        os.makedirs(home, 0o700)
        changed = True
    with _owned_ssh_dir(home, entry) as ssh_fd:
        _other_key_files_remove(ssh_fd)
        changed = _keys_write(users, ssh_fd, entry, account, line) or changed
    return {
        "account": account,
        "uid": entry["uid"],
        "home": entry["home"],
        "expires": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "account_expires": expiry_day,
        "key_fingerprint": key_fingerprint,
        "created": created,
        "changed": changed,
    }


KEY_LINE = re.compile(r'^expiry-time="(\d{12})Z" (\S+) (\S+)$')


def rekey(users: Users, account: str, key_file: str, expires: dt.datetime | None = None) -> Rekeyed:
    """The customer replaced their key: the account is bound to the new one (its comment field), and
    authorized_keys holds exactly it, behind the same expiry-time (or --expires); the old key is gone."""
    key_type, data = read_public_key(key_file)
    key_fingerprint = fingerprint(data)
    entry = users.lookup(account)
    if entry is None:
        raise Failed(f"the account {account} does not exist on this node: nothing to rekey (grant it first)")
    if not managed(entry):
        raise Refused(f"the account {account} exists and was not created by this tool: not touching it")
    if record_read(users, account) is not None:
        raise Refused(f"the account {account} is being revoked: its key is not replaced")
    if entry.get("shell") == GRACE_SHELL:
        raise Refused(f"the account {account} is in its data window (read-only SFTP): its key is not replaced")
    with _owned_ssh_dir(users.path(entry["home"]), entry) as ssh_fd:
        _other_key_files_remove(ssh_fd)  # a replaced (perhaps leaked) key planted there would still log in
        # The held file is the truth where it exists: the tenant may have written any expiry into its own copy.
        current = held_key_read(users, account) or _read_authorized_keys(ssh_fd) or ""
        current = without_probe(current)  # a hand-over's probe line left behind is no restriction of the customer's
        if current.strip() and not KEY_LINE.match(current.strip()):
            # A key with other options (restrict, command=...) is limited on purpose: never widened here.
            raise Refused(f"the installed key of {account} carries restrictions: it is not replaced")
        if expires is not None:
            expiry = expires.strftime("%Y%m%d%H%M")
        else:  # the backstop the grant set: the account's owner may have removed the file, so it is not guessed
            match = KEY_LINE.match(current.strip())
            if match is None:
                raise Failed(f"{account} has no installed key to take the expiry-time from: pass --expires")
            expiry = match.group(1)
        line = f'expiry-time="{expiry}Z" {key_type} {data}\n'
        changed = bound_key(entry) != key_fingerprint
        if changed:
            # The binding first: a grant with the old key is refused from now on, even if this stops here.
            comment = f"{MARKER} key={key_fingerprint[len('SHA256:') :]}"
            result = users.tool("usermod", "--comment", comment, account)
            if result.returncode != 0 or bound_key(users.lookup(account) or entry) != key_fingerprint:
                raise Failed(f"usermod --comment failed: {result.stderr.strip() or result.stdout.strip()}")
        changed = _keys_write(users, ssh_fd, entry, account, line) or changed
    return {
        "account": account,
        "key_fingerprint": key_fingerprint,
        "expires": dt.datetime.strptime(expiry, "%Y%m%d%H%M").strftime("%Y-%m-%dT%H:%M:00Z"),
        "changed": changed,
    }


# The hand-over's proof (issue 41): the shop logs in as the account before the rental clock starts, with a key of its
# own made for that one proof (it never holds the customer's private key). Its line sits beside the customer's,
# limited (restrict: no pty, no forwarding) and short-lived, and is removed after the proof, whatever happened.
PROBE_COMMENT = "b200-handover-probe"
PROBE_KEY_TYPE = "ssh-ed25519"
PROBE_MAX_MINUTES = 60


def check_minutes(text: str) -> int:
    try:
        minutes = int(text)
    except ValueError:
        minutes = 0
    if not 1 <= minutes <= PROBE_MAX_MINUTES:
        raise argparse.ArgumentTypeError(f"invalid --minutes {text!r}: a whole number from 1 to {PROBE_MAX_MINUTES}")
    return minutes


def is_probe_line(line: str) -> bool:
    """A line probe-key wrote (it alone ends with the probe's comment: the tool writes the customer's without one)."""
    fields = line.split()
    return len(fields) >= 3 and fields[-1] == PROBE_COMMENT


def _key_file_lines(content: str) -> list[str]:
    """Each line with its own newline (the last one may have none): joined again, the same bytes."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", content)


def without_probe(content: str) -> str:
    """The key file without its probe lines, every other line byte for byte."""
    return "".join(line for line in _key_file_lines(content) if not is_probe_line(line))


def probe_expiry(minutes: int) -> str:
    """OpenSSH's expiry-time counts whole minutes: rounded up, so that the key lives at least `minutes`."""
    ends = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=minutes, seconds=59)
    return ends.strftime("%Y%m%d%H%M")


def _lines_gone(before: str, after: str) -> int:
    return len(_key_file_lines(before)) - len(_key_file_lines(after))


def probe_key_add(users: Users, account: str, key_file: str, minutes: int) -> ProbeAdded:
    """One probe line after the customer's, in the held file and the home's copy (which follows it, as grant writes
    both); a probe line already there is replaced. The customer's line stays byte for byte."""
    key_type, data = read_public_key(key_file)
    if key_type != PROBE_KEY_TYPE:
        raise KeyRefused(f"the probe key must be an {PROBE_KEY_TYPE} key (the shop makes one for each hand-over)")
    entry = users.lookup(account)
    if entry is None:
        raise Failed(f"the account {account} does not exist on this node: nothing to prove (grant it first)")
    if not managed(entry):
        raise Refused(f"the account {account} was not created by this tool: not touching it")
    if record_read(users, account) is not None:
        raise Refused(f"the account {account} is being revoked: no probe key")
    if entry.get("shell") == GRACE_SHELL:
        raise Refused(f"the account {account} is in its data window (read-only SFTP): no probe key")
    customer = without_probe(held_key_read(users, account) or "")
    installed = _installed_key(customer)
    if installed is None:
        raise Failed(f"{account} has no customer key installed: nothing to prove (grant it first)")
    if installed == (key_type, data):
        raise KeyRefused("the probe key is the customer's own key")
    expiry = probe_expiry(minutes)
    line = f'restrict,expiry-time="{expiry}Z" {key_type} {data} {PROBE_COMMENT}\n'
    content = customer + ("" if customer.endswith("\n") else "\n") + line
    with _owned_ssh_dir(users.path(entry["home"]), entry) as ssh_fd:  # a link at ~/.ssh is removed, never followed
        _keys_write(users, ssh_fd, entry, account, content)
    return {
        "account": account,
        "probe_fingerprint": fingerprint(data),
        "expiry_time": dt.datetime.strptime(expiry, "%Y%m%d%H%M").strftime("%Y-%m-%dT%H:%MZ"),
    }


def probe_key_remove(users: Users, account: str) -> ProbeRemoved:
    """Every probe line out of the held file and the home's copy, each other line byte for byte. Idempotent: after a
    grant, rekey or grace (which write the customer's key alone) there is nothing to remove. The home is only read
    where it is what it should be: a link at ~/.ssh or its key file is left alone, never followed."""
    entry = users.lookup(account)
    if entry is None:
        return {"account": account, "existed": False, "removed": 0}
    if not managed(entry):
        raise Refused(f"the account {account} was not created by this tool: not touching it")
    removed = 0
    held = held_key_read(users, account)
    if held:
        kept = without_probe(held)
        if kept != held:
            removed += _lines_gone(held, kept)
            held_key_write(users, account, kept, entry["gid"])
    try:
        home_fd = _open_dir(users.path(entry["home"]))
    except OSError:  # no home (a revocation under way), or not a real folder
        return {"account": account, "existed": True, "removed": removed}
    try:
        ssh_fd = _open_dir(".ssh", home_fd)
    except OSError:  # none, or a link (ELOOP) or a file (ENOTDIR): nothing of this tool's there
        ssh_fd = -1
    finally:
        os.close(home_fd)
    if ssh_fd >= 0:
        try:
            current = _read_authorized_keys(ssh_fd) or ""  # "" for a link or a folder there
            kept = without_probe(current)
            if kept != current:
                removed += _lines_gone(current, kept)
                _write_authorized_keys(ssh_fd, kept, entry["uid"], entry["gid"])
        finally:
            os.close(ssh_fd)
    return {"account": account, "existed": True, "removed": removed}


def _status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            return dict((key, value.strip()) for key, value in (line.split(":", 1) for line in handle if ":" in line))
    except OSError:
        return {}


def _processes_of(ids: Ids) -> list[int]:
    """Live processes whose real, effective, saved or filesystem uid is the account's (zombies are dead)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _status(int(name))
        if not fields or fields.get("State", "").split()[:1] in (["Z"], ["X"]):
            continue
        if any(int(number) in ids for number in fields.get("Uid", "").split() if number.isdigit()):
            pids.append(int(name))
    return pids


def _describe(pid: int) -> str:
    fields = _status(pid)
    uid = (fields.get("Uid", "?").split() or ["?"])[0]
    return f"pid {pid} ({fields.get('Name', 'gone')}, uid {uid}, state {fields.get('State', '?')})"


def kill_processes(ids: Ids) -> int:
    """SIGKILL every process running as the ids, until none is left (they may fork meanwhile)."""
    killed: set[int] = set()
    for _ in range(100):
        pids = _processes_of(ids)
        if not pids:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.05)
    left = ", ".join(_describe(pid) for pid in _processes_of(ids)[:10])
    raise Failed(
        f"processes of {ids} survive SIGKILL or keep appearing after 5 s ({left}; state D: stuck in a driver): "
        "the account is kept, locked; stop them (or reboot the node), then revoke again"
    )


def stop_processes(ids: Ids, term_seconds: float) -> tuple[int, int]:
    """The end of a rental (issue 41): SIGTERM to every process of the ids, so that a training loop that saves a
    checkpoint on SIGTERM keeps it; whatever still runs after `term_seconds` (or forked meanwhile) gets SIGKILL.
    The caller has closed the door first (no new login), so the wait ends. Returns (terminated, killed)."""
    terminated = set()
    deadline = time.monotonic() + max(0.0, term_seconds)
    while time.monotonic() < deadline:
        pids = _processes_of(ids)
        if not pids:
            break
        for pid in pids:
            if pid not in terminated:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    terminated.add(pid)
        time.sleep(0.1)
    return len(terminated), kill_processes(ids)


# System V IPC: a shared memory segment outlives its processes and is readable by anyone its mode lets in.
SYSV_IPC = (("/proc/sysvipc/shm", "-m"), ("/proc/sysvipc/msg", "-q"), ("/proc/sysvipc/sem", "-s"))


def remove_ipc(ids: Ids) -> list[str]:
    """Remove the ids' System V shared memory segments, message queues and semaphore sets (as owner or
    creator); what could not be removed is returned."""
    left = []
    for table, option in SYSV_IPC:
        for fields in _ipc_rows(table):
            owners = [int(fields.get(key, "")) for key in ("uid", "cuid") if fields.get(key, "").isdigit()]
            if not any(owner in ids for owner in owners):
                continue
            ident = fields.get("shmid") or fields.get("msqid") or fields.get("semid") or ""
            program = shutil.which("ipcrm", path=TOOL_PATH)
            result = None
            if program is not None:
                result = subprocess.run(
                    [program, option, ident], capture_output=True, text=True, timeout=60, check=False
                )
            if result is None or result.returncode != 0:
                why = "ipcrm is not installed" if result is None else result.stderr.strip()
                left.append(f"System V {os.path.basename(table)} {ident} ({why})")
    return left


def _ipc_rows(table: str) -> list[dict[str, str]]:
    try:
        with open(table, encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    header = lines[0].split() if lines else []
    return [dict(zip(header, line.split())) for line in lines[1:]]  # noqa: B905 - no strict= before Python 3.10


# The cards: no process may be left on them (nvidia-smi lists every process holding GPU memory).
GPU_QUERY = ("--query-compute-apps=pid,used_memory", "--format=csv,noheader")
GPU_SETTLE_SECONDS = 10  # the driver frees a killed process's memory in a moment, not at once


def gpu_processes() -> list[tuple[int, str]] | None:
    """Every process on the node's GPUs; None when nvidia-smi is not installed (a node without cards)."""
    program = shutil.which("nvidia-smi", path=TOOL_PATH)
    if program is None:
        return None
    result = subprocess.run([program, *GPU_QUERY], capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        said = " ".join((result.stdout + " " + result.stderr).split())[:300]
        raise Failed(
            f"nvidia-smi exited {result.returncode} ({said}): the cards cannot be proven free; the account is "
            "kept, locked; check the cards (dmesg, Xid errors), then revoke again"
        )
    processes = []
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if not line.strip() or line.strip().lower().startswith("no running processes"):
            continue
        if len(cells) != 2 or not cells[0].isdigit():
            raise Failed(
                f"nvidia-smi printed {line.strip()[:200]!r}, not 'pid, used_memory': the cards cannot be checked"
            )
        processes.append((int(cells[0]), cells[1]))
    return processes


def gpus_freed(ids: Ids) -> GpuCheck:
    """Wait for the cards to hold no process at all (the account's were killed; another one's left on them
    makes the node unfit for the next tenant too); what is still there is returned."""
    deadline = time.monotonic() + GPU_SETTLE_SECONDS
    while True:
        processes = gpu_processes()
        if processes is None:
            return {"checked": False, "left": [], "why": "nvidia-smi is not installed: no cards to check"}
        if not processes or time.monotonic() >= deadline:
            left = [f"{_describe(pid)} holding {memory}" for pid, memory in processes]
            return {"checked": True, "left": left}
        kill_processes(ids)  # one of the account's that slipped in meanwhile
        time.sleep(0.5)


# A revocation under way: the account's uid, kept until the node is proven clean -----------------------


def _record(directory: str, account: str) -> str:
    return os.path.join(directory, "revoking", account)


def record_read(users: Users, account: str) -> Ids | None:
    with state_locked(users) as directory:
        try:
            with open(_record(directory, account), encoding="ascii") as handle:
                return Ids.load(handle.read())
        except (FileNotFoundError, ValueError, IndexError):
            return None


def record_write(users: Users, account: str, ids: Ids) -> None:
    with state_locked(users) as directory:
        path = _record(directory, account)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(f"{path}.{os.getpid()}", "w", encoding="ascii") as handle:
            handle.write(ids.dump())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(f"{path}.{os.getpid()}", path)


def record_remove(users: Users, account: str) -> None:
    with state_locked(users) as directory, contextlib.suppress(FileNotFoundError):
        os.unlink(_record(directory, account))


def _close_door(users: Users, account: str, home: str) -> None:
    """No new login: the account expired, its keys removed."""
    users.tool("usermod", "--expiredate", EXPIRED_DAY, account)
    held_key_remove(users, account)
    try:
        home_fd = _open_dir(home)
        try:
            ssh_fd = _open_dir(".ssh", home_fd)
            try:
                os.unlink("authorized_keys", dir_fd=ssh_fd)
            finally:
                os.close(ssh_fd)
        finally:
            os.close(home_fd)
    except OSError:
        pass


def scrub(users: Users, ids: Ids, scratch: list[str], term_seconds: float = 0) -> Scrubbed:
    """The end of the rental: the uid's processes, files, IPC objects and GPU work gone, or Failed saying
    what is left (nothing about the account is removed then: the next revoke starts again)."""
    terminated, killed = stop_processes(ids, term_seconds)
    swept = [remove_owned(root, ids) for root in sweep_roots(users, scratch)]
    ipc_left = remove_ipc(ids)
    gpus = gpus_freed(ids)
    killed += kill_processes(ids)  # anything started from a file that was being removed
    files_left = [path for sweep in swept for path in sweep["left"]]
    problems = []
    if files_left:
        problems.append("files it owns could not be removed: " + ", ".join(repr(path) for path in files_left[:10]))
    if ipc_left:
        problems.append("IPC objects could not be removed: " + ", ".join(ipc_left))
    if gpus["left"]:
        problems.append("processes are still on the GPUs: " + "; ".join(gpus["left"]))
    if problems:
        raise Failed(
            f"the node is not clean after {ids}: " + "; ".join(problems) + ". The account is kept, locked, and "
            "the node must not be handed over: fix this (a read-only or busy mount, a process of another account "
            "on the cards), then revoke again"
        )
    return {
        "processes_terminated": terminated,
        "processes_killed": killed,
        "files_removed": sum(sweep["removed"] for sweep in swept),
        "swept": [sweep["root"] for sweep in swept],
        "gpus": "no process left on the cards" if gpus["checked"] else gpus["why"],
    }


def revoke(users: Users, account: str, scratch: list[str] | None = None, term_seconds: float = 0) -> Revoked:
    entry = users.lookup(account)
    home = users.path(f"/home/{account}")
    if entry is None:
        ids = record_read(users, account)  # a revocation cut short after userdel
        if ids is None:
            return {"account": account, "existed": False, "removed": False, "processes_killed": 0}
    else:
        if not managed(entry):
            raise Refused(f"the account {account} was not created by this tool: not removing it")
        ids = Ids(entry["uid"], subordinate_ranges(users, account, entry["uid"]))
        record_write(users, account, ids)
        # First close the door (no new logins), then empty the room.
        _close_door(users, account, users.path(entry["home"]))
    report = scrub(users, ids, scratch or [], term_seconds)
    if entry is not None:
        result = users.tool("userdel", "--remove", account)
        for _ in range(5):
            if result.returncode != 8:  # 8: the user is still logged in (a process slipped through)
                break
            report["processes_killed"] += kill_processes(ids)
            result = users.tool("userdel", "--remove", account)
        if users.lookup(account) is not None:
            raise Failed(f"userdel {account} failed: {result.stderr.strip() or result.stdout.strip()}")
    if os.path.lexists(home):
        shutil.rmtree(home)  # userdel leaves files it could not remove (exit 12)
    record_remove(users, account)
    held_remove(users, account)
    b200_remove(users, account)
    return {"account": account, "existed": True, "removed": True, "uid": ids.uid, **report, "files_left": []}


# The data window after the end: the files stay, nothing of the tenant runs, its key reads over SFTP only ------

SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server")
# sshd runs a forced command through the login shell: bash would source the tenant's ~/.bashrc first (Debian
# builds it to, for sessions started by sshd), so the window's shell is one that reads no startup file.
GRACE_SHELL = "/bin/sh"
# The day that means "expired" (shadow day 1: day 0 means "never" to some tools): no login, whatever the key.
EXPIRED_DAY = "1970-01-02"
# Where cron and at keep a user's jobs (Debian, then Red Hat): moved aside so that none runs in the window.
JOB_SPOOLS = (
    ("cron", "/var/spool/cron/crontabs"),
    ("cron", "/var/spool/cron"),
    ("at", "/var/spool/cron/atjobs"),
    ("at", "/var/spool/at"),
)


def sftp_server() -> str:
    for path in SFTP_SERVERS:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise Failed(f"no sftp-server on this node (looked at {', '.join(SFTP_SERVERS)}): install openssh-sftp-server")


def grace_key_line(server: str, until: dt.datetime, key_type: str, data: str) -> str:
    # restrict: no pty, no forwarding, no ~/.ssh/rc; the forced command is the only program the key starts.
    return f'restrict,command="{server} -R",expiry-time="{until.strftime("%Y%m%d%H%M")}Z" {key_type} {data}\n'


def _installed_key(content: str) -> tuple[str, str] | None:
    """(type, data) of the key this tool wrote (with or without the window's options), or None."""
    for line in content.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[-2] in KEY_TYPES:
            return fields[-2], fields[-1]
    return None


def hold_jobs(users: Users, account: str, uid: int) -> list[str]:
    """The account's crontab and at jobs, moved into the state folder (root's only): they never run again,
    and the revocation removes them with the rest of its files."""
    held = []
    with state_locked(users) as directory:
        target = os.path.join(directory, "held", account)
        for kind, spool in JOB_SPOOLS:
            folder = users.path(spool)
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                path = os.path.join(folder, name)
                info = os.lstat(path)
                ours = name == account if kind == "cron" else info.st_uid == uid
                if not stat.S_ISREG(info.st_mode) or not ours:
                    continue
                os.makedirs(target, mode=0o700, exist_ok=True)
                os.replace(path, os.path.join(target, f"{kind}-{name}"))
                held.append(f"{kind} {os.path.join(spool, name)}")
    return held


def held_remove(users: Users, account: str) -> None:
    """The jobs held in the data window go with the account."""
    with state_locked(users) as directory:
        shutil.rmtree(os.path.join(directory, "held", account), ignore_errors=True)


def _expire_on(users: Users, account: str, day: str) -> None:
    shadow = users.shadow(account)
    if (shadow["account_expires"] if shadow else None) != day:
        result = users.tool("usermod", "--expiredate", day, account)
        if result.returncode != 0:
            raise Failed(f"usermod --expiredate failed: {result.stderr.strip()}")


def _limit_key(users: Users, entry: NamedEntry, server: str, until: dt.datetime) -> bool:
    """The installed key, limited to read-only SFTP until `until`; True when the file changed. Verified by
    reading it back: it holds that one line, whatever was there."""
    home_fd = _open_dir(users.path(entry["home"]))
    try:
        ssh_fd = _ssh_dir(home_fd)
        try:
            _other_key_files_remove(ssh_fd)
            # The held key where there is one: the tenant's own copy may hold any key it chose.
            key = _installed_key(held_key_read(users, entry["name"]) or _read_authorized_keys(ssh_fd) or "")
            if key is None:
                raise Failed(
                    f"{entry['name']} has no installed key to limit to SFTP (its authorized_keys is gone): its "
                    "processes are stopped and the account stays locked; no data window"
                )
            line = grace_key_line(server, until, *key)
            changed = _keys_write(users, ssh_fd, entry, entry["name"], line)
            if _read_authorized_keys(ssh_fd) != line or held_key_read(users, entry["name"]) != line:
                raise Failed(f"the key of {entry['name']} changed while it was being limited: the account stays locked")
            return changed
        finally:
            os.close(ssh_fd)
    finally:
        os.close(home_fd)


def grace(users: Users, account: str, until: dt.datetime, term_seconds: float = 0) -> Graced:
    """The rental ended: the account keeps its files until `until` and may download them over read-only SFTP;
    its processes, GPU work, System V IPC and scheduled jobs are stopped now. Idempotent.

    The order matters (issue 39): the tenant owns its home and ~/.ssh, so a process of its left running could
    write the whole key back after the tool limited it. The door is closed first (the account expired: sshd lets
    no login in), then the tenant is stopped, whatever the state of its files, then the key is limited and read
    back with no process of the account alive, and only then does the door open for the window."""
    entry = users.lookup(account)
    if entry is None:
        return {"account": account, "existed": False}
    if not managed(entry):
        raise Refused(f"the account {account} was not created by this tool: not touching it")
    if record_read(users, account) is not None:
        raise Refused(f"the account {account} is being revoked: no data window")
    server = sftp_server()
    _expire_on(users, account, EXPIRED_DAY)
    ids = Ids(entry["uid"], subordinate_ranges(users, account, entry["uid"]))
    jobs = hold_jobs(users, account, entry["uid"])
    terminated, killed = stop_processes(ids, term_seconds)
    ipc_left = remove_ipc(ids)
    gpus = gpus_freed(ids)
    changed = False
    if entry.get("shell") != GRACE_SHELL:  # a forced command runs through it: one that reads no tenant file
        result = users.tool("usermod", "--shell", GRACE_SHELL, account)
        if result.returncode != 0:
            raise Failed(f"usermod --shell failed: {result.stderr.strip()}")
        changed = True
    changed = _limit_key(users, {**entry, "name": account}, server, until) or changed
    killed += kill_processes(ids)  # a login that was under way when the door closed
    _limit_key(users, {**entry, "name": account}, server, until)  # and nothing it did to the key stays
    problems = []
    if ipc_left:
        problems.append("IPC objects could not be removed: " + ", ".join(ipc_left))
    if gpus["left"]:
        problems.append("processes are still on the GPUs: " + "; ".join(gpus["left"]))
    if problems:
        raise Failed(f"the data window of {account} stays closed (the account is locked): " + "; ".join(problems))
    _expire_on(users, account, account_expiry_day(until))
    return {
        "account": account,
        "existed": True,
        "changed": changed,
        "until": until.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sftp_server": server,
        "processes_terminated": terminated,
        "processes_killed": killed,
        "jobs_held": jobs,
        "gpus": "no process left on the cards" if gpus["checked"] else gpus["why"],
    }


# The rental's own command on the node (issue 41): `b200`, for the order's account. Its code, its wrapper, the
# login banner and each order's facts live outside the tool's own state folder (root's alone): the account reads
# them, only root writes them.
B200_DIR = "/var/lib/b200"
B200_WRAPPER = "/usr/local/bin/b200"
B200_WELCOME = "/etc/profile.d/b200-welcome.sh"
ORDER_STATE_MAX = 64 * 1024


def _root_file(path: str, content: str, mode: int, gid: int = 0) -> None:
    """A file only root writes, replaced whole (its folders made root's, 0755, where missing)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, 0o755, exist_ok=True)
    dir_fd = _open_dir(folder)
    try:
        partial = f".{os.path.basename(path)}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial, dir_fd=dir_fd)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        try:
            os.fchown(fd, 0, gid)
            os.fchmod(fd, mode)
            os.write(fd, content.encode())
        finally:
            os.close(fd)
        os.replace(partial, os.path.basename(path), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def b200_install(users: Users, source: str, python: str) -> Installed:
    """Install `b200` from the shop's copy under `source` (the folder holding provisioning/): its modules under
    /var/lib/b200/tool, the wrapper on the PATH and the login banner. Idempotent."""
    if not re.match(r"^[A-Za-z0-9_./+-]{1,255}$", python):
        raise Failed(f"--python {python!r} is not a plain path")
    tool = users.path(f"{B200_DIR}/tool")
    package = os.path.join(source, "provisioning")
    names = ["__init__.py", "node_tools/__init__.py"]
    names += sorted(f"node_tools/{name}" for name in os.listdir(os.path.join(package, "node_tools"))
                    if re.match(r"^b200\w*\.py$", name))  # fmt: skip
    # `b200 verify` runs the hand-over's preflight (its quick part): the package goes beside it
    for folder, _dirs, files in os.walk(os.path.join(package, "preflight")):
        names += sorted(os.path.relpath(os.path.join(folder, name), package) for name in files if name.endswith(".py"))
    if "node_tools/b200.py" not in names:
        raise Failed(f"{package}/node_tools holds no b200.py")
    for name in names:
        with open(os.path.join(package, name), encoding="utf-8") as handle:
            _root_file(os.path.join(tool, "provisioning", name), handle.read(), 0o644)
    orders = users.path(f"{B200_DIR}/orders")
    wrapper = (
        "#!/bin/sh\n# b200: the rental's own command (installed by the shop's access tool, removed at the end)\n"
        f'B200_ORDER_FILE="${{B200_ORDER_FILE:-{orders}/$(id -un).json}}" PYTHONPATH="{tool}" '
        f'exec {python} -m provisioning.node_tools.b200 "$@"\n'
    )
    _root_file(users.path(B200_WRAPPER), wrapper, 0o755)
    welcome = (
        "# The rental's welcome, for the order's account only (b200 prints nothing for any other)\n"
        f'if [ -r "{orders}/$(id -un).json" ]; then {users.path(B200_WRAPPER)} welcome; fi\n'
    )
    _root_file(users.path(B200_WELCOME), welcome, 0o644)
    return {"installed": users.path(B200_WRAPPER), "modules": len(names)}


def order_state(users: Users, account: str, state_file: str) -> OrderState:
    """The order's facts for `b200` (reference, end, data window, cards, environment...), from the shop: one JSON
    object, root's, readable by the account's group alone."""
    entry = users.lookup(account)
    if entry is None or not managed(entry):
        raise Refused(f"the account {account} is not one of this tool's")
    with open(state_file, "rb") as handle:
        raw = handle.read(ORDER_STATE_MAX + 1)
    try:
        body = json.loads(raw.decode("utf-8")) if len(raw) <= ORDER_STATE_MAX else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise Failed(f"{state_file} is not one JSON object of at most {ORDER_STATE_MAX} bytes")
    path = users.path(f"{B200_DIR}/orders/{account}.json")
    _root_file(path, json.dumps(body, sort_keys=True) + "\n", 0o640, gid=entry["gid"])
    return {"account": account, "written": path}


def b200_remove(users: Users, account: str) -> None:
    """The end of the rental: the order's facts go; the command and banner too (a node has one tenant)."""
    for path in (f"{B200_DIR}/orders/{account}.json", B200_WRAPPER, B200_WELCOME):
        if os.path.lexists(users.path(path)):  # (a read-only /etc answers EROFS even for a file it lacks)
            os.unlink(users.path(path))
    shutil.rmtree(users.path(f"{B200_DIR}/tool"), ignore_errors=True)


# The notice before the end (issue 41): ~/.b200/notice.json for `b200 status` and the tenant's own scripts, and a
# line on each of the account's terminals.
NOTICE_DIR, NOTICE_FILE = ".b200", "notice.json"
NOTICE_REASONS = ("end", "move", "maintenance")
NOTICE_WORDS = {
    "end": "this rental ends",
    "move": "this node stops for a move of your rental to another node",
    "maintenance": "this node stops for maintenance",
}


def notice(users: Users, account: str, ends_at: dt.datetime, reason: str, grace_seconds: int) -> Noticed:
    """Tell the account that its processes stop at `ends_at`: the file, written as the tool writes every file of
    the home (no link followed, owned by the account, replaced whole), and a line on its terminals. Idempotent."""
    entry = users.lookup(account)
    if entry is None:
        return {"account": account, "existed": False}
    if not managed(entry):
        raise Refused(f"the account {account} was not created by this tool: not touching it")
    left = max(0, int((ends_at - dt.datetime.now(dt.timezone.utc)).total_seconds()))
    body: NoticeBody = {"ends_at": ends_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "reason": reason, "seconds_left": left}
    home_fd = _open_dir(users.path(entry["home"]))
    try:
        folder_fd = _real_dir(home_fd, NOTICE_DIR)
        try:
            os.fchown(folder_fd, entry["uid"], entry["gid"])
            _file_replace(folder_fd, NOTICE_FILE, json.dumps(body, sort_keys=True) + "\n", entry["uid"], entry["gid"])
        finally:
            os.close(folder_fd)
    finally:
        os.close(home_fd)
    line = (
        f"B200 Pairs: {NOTICE_WORDS[reason]} at {body['ends_at']} (in {max(1, left // 60)} min). Save your work: "
        f"then your processes get SIGTERM, and SIGKILL {grace_seconds} s later. `b200 status` says more."
    )
    return {"account": account, "existed": True, "notice": body, "terminals": tell_terminals(entry["uid"], line)}


def _file_replace(dir_fd: int, name: str, content: str, uid: int, gid: int) -> None:
    """NAME in the folder, replaced whole by a new file of the account's (a link or hard link there is replaced,
    never written through)."""
    partial = f".{name}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial, dir_fd=dir_fd)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o644)
        os.write(fd, content.encode())
    finally:
        os.close(fd)
    os.replace(partial, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def tell_terminals(uid: int, line: str) -> int:
    """Write the line on each pseudo-terminal the uid owns (its logins' shells, tmux, screen); a busy or closed
    one is skipped, never waited for. Returns how many were told."""
    told = 0
    text = ("\r\n*** " + line + " ***\r\n").encode("ascii", errors="replace")
    try:
        names = [name for name in os.listdir("/dev/pts") if name.isdigit()]
    except OSError:
        return 0
    for name in names:
        path = f"/dev/pts/{name}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if stat.S_ISCHR(info.st_mode) and info.st_uid == uid:
                os.write(fd, text)
                told += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return told


def show(users: Users, account: str) -> Shown:
    entry = users.lookup(account)
    if entry is None:
        return {"account": account, "exists": False}
    home = users.path(entry["home"])
    keys: list[ShownKey] = []
    held = held_key_read(users, account)
    try:
        if held is not None:  # what sshd reads; the home's copy is the tenant's to change
            raise FileNotFoundError
        home_fd = _open_dir(home)
        try:
            ssh_fd = _open_dir(".ssh", home_fd)
            try:
                content = _read_authorized_keys(ssh_fd) or ""
            finally:
                os.close(ssh_fd)
        finally:
            os.close(home_fd)
    except OSError:
        content = held or ""
    for line in content.splitlines():
        match = re.match(r'^(?:expiry-time="(\d{12})Z" )?(\S+) (\S+)', line.strip())
        if match and match.group(2) in KEY_TYPES:
            expiry = match.group(1)
            keys.append(
                {
                    "type": match.group(2),
                    "fingerprint": fingerprint(match.group(3)),
                    "expiry_time": dt.datetime.strptime(expiry, "%Y%m%d%H%M").strftime("%Y-%m-%dT%H:%MZ")
                    if expiry
                    else None,
                }
            )
    shadow = users.shadow(account)
    return {
        "account": account,
        "exists": True,
        "managed": managed(entry),
        "uid": entry["uid"],
        "home": entry["home"],
        "home_exists": os.path.isdir(home),
        "bound_key": bound_key(entry) or None,
        "password": shadow["password"] if shadow else None,
        "account_expires": shadow["account_expires"] if shadow else None,
        "authorized_keys": keys,
    }


# sshd's configuration --------------------------------------------------------------------------------------


def sshd_settings(account: str) -> dict[str, str]:
    """What sshd would apply to a login of `account` from loopback (`sshd -T`: its Match blocks included)."""
    program = shutil.which("sshd", path=TOOL_PATH)
    if program is None:
        raise Failed("sshd is not installed on this node")
    result = subprocess.run(
        [program, "-T", "-C", f"user={account},host=localhost,addr=127.0.0.1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise Failed(f"sshd -T failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    settings: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, _, value = line.strip().partition(" ")
        settings.setdefault(name.lower(), value.strip())
    return settings


def key_file_problem(users: Users, pattern: str, account: str) -> str:
    """Why a tenant could write this AuthorizedKeysFile entry ("" when only root can)."""
    if not pattern.startswith("/") or "%h" in pattern or pattern.startswith("~"):
        return f"{pattern} is in the tenant's home, which the tenant owns"
    path = pattern.replace("%u", account).replace("%U", "0").replace("%%", "%")
    folder = os.path.dirname(path)
    while folder != "/" and not os.path.lexists(users.path(folder)):
        folder = os.path.dirname(folder)
    try:
        only_root_writes(users.path(folder))
    except Failed:
        return f"{pattern} is in {folder}, a folder someone other than root may write into"
    return ""


def sshd_check(users: Users, account: str) -> SshdCheck:
    """Whether sshd lets the tenant `account` add keys, and reads the file this tool writes (issue 39)."""
    settings = sshd_settings(account)
    files = settings.get("authorizedkeysfile", "none").split()
    files = [] if files == ["none"] else files
    problems = [problem for problem in (key_file_problem(users, name, account) for name in files) if problem]
    held = f"{HELD_KEYS_DIR}/%u"
    if held not in files and f"{HELD_KEYS_DIR}/{account}" not in files:
        problems.append(f"sshd does not read {held}, where this tool keeps the customer's key")
    command = settings.get("authorizedkeyscommand", "none")
    if command.lower() != "none":
        problems.append(f"AuthorizedKeysCommand {command}: this tool cannot tell which keys it accepts")
    return {"ok": not problems, "account": account, "authorized_keys_file": files, "problems": problems}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="access.py", description="Per-order SSH access on this node.")
    commands = parser.add_subparsers(dest="command", required=True)
    names = ("grant", "revoke", "show", "rekey", "grace", "sshd-check", "notice", "order-state", "b200-install")
    for name in (*names, "probe-key"):
        command = commands.add_parser(name)
        command.add_argument("--account", required=name != "b200-install", type=check_account)
        command.add_argument("--users-prefix", default="", help="work on DIR/etc and DIR/home (test sandbox)")
        if name == "revoke":
            command.add_argument(
                "--scratch", action="append", default=[], metavar="DIR", help="a scratch folder of the node to sweep"
            )
        if name in ("revoke", "grace"):
            command.add_argument(
                "--term-seconds", type=float, default=0, help="SIGTERM first, SIGKILL after this (default: at once)"
            )
        if name == "order-state":
            command.add_argument("--file", required=True, help="the order's facts for b200, one JSON object")
        if name == "b200-install":
            command.add_argument("--source", required=True, help="the folder holding the shop's provisioning/")
            command.add_argument("--python", default="python3", help="the Python that runs b200 (3.8+)")
        if name == "notice":
            command.add_argument("--ends-at", required=True, type=parse_expires, help="ISO 8601, with a zone")
            command.add_argument("--reason", required=True, choices=NOTICE_REASONS)
            command.add_argument("--grace-seconds", type=int, default=0, help="between SIGTERM and SIGKILL")
        if name == "grant":
            command.add_argument("--key-file", required=True, help="the customer's OpenSSH public key")
            command.add_argument("--expires", required=True, type=parse_expires, help="ISO 8601, with a zone")
        if name == "grace":
            command.add_argument("--until", required=True, type=parse_expires, help="ISO 8601, with a zone")
        if name == "probe-key":
            adds = command.add_mutually_exclusive_group(required=True)
            adds.add_argument("--key-file", help="the hand-over's probe key, one ed25519 public key")
            adds.add_argument("--remove", action="store_true", help="remove every probe line (idempotent)")
            command.add_argument("--minutes", type=check_minutes, help="how long the probe key lives (1-60)")
        if name == "rekey":
            command.add_argument("--key-file", required=True, help="the customer's new OpenSSH public key")
            command.add_argument(
                "--expires", type=parse_expires, help="ISO 8601, with a zone (default: the installed key's expiry-time)"
            )
    args = parser.parse_args(argv)
    if args.command == "probe-key" and (args.minutes is None) != bool(args.remove):
        parser.error("probe-key: --key-file needs --minutes; --remove takes none")
    report: Mapping[str, object]
    try:
        if os.geteuid() != 0 and args.command != "show":
            raise Failed("must run as root")
        users = Users(args.users_prefix)
        if args.command == "grant":
            report = grant(users, args.account, args.key_file, args.expires)
        elif args.command == "grace":
            report = grace(users, args.account, args.until, args.term_seconds)
        elif args.command == "order-state":
            report = order_state(users, args.account, args.file)
        elif args.command == "b200-install":
            report = b200_install(users, args.source, args.python)
        elif args.command == "notice":
            report = notice(users, args.account, args.ends_at, args.reason, args.grace_seconds)
        elif args.command == "rekey":
            report = rekey(users, args.account, args.key_file, args.expires)
        elif args.command == "revoke":
            report = revoke(users, args.account, args.scratch, args.term_seconds)
        elif args.command == "probe-key" and args.remove:
            report = probe_key_remove(users, args.account)
        elif args.command == "probe-key":
            report = probe_key_add(users, args.account, args.key_file, args.minutes)
        elif args.command == "sshd-check":
            report = sshd_check(users, args.account)
        else:
            report = show(users, args.account)
    except KeyRefused as error:
        print(f"access.py: key refused: {error}", file=sys.stderr)
        return 4
    except Refused as error:
        print(f"access.py: refused: {error}", file=sys.stderr)
        return 3
    except (Failed, OSError, subprocess.SubprocessError) as error:
        print(f"access.py: failed: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
