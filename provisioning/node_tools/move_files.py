"""A tenant's files, read on one node and written on another, for a move to a spare node (provisioning/moves.py).

Runs as root on the node (standard library only, Python 3.8+). The shop's worker carries the bytes between the
two nodes (the nodes do not trust each other); this tool only touches the account's own files, never follows a
link, and opens every folder on the way with O_NOFOLLOW relative to the one above it, so a tenant who swaps a
folder for a link meanwhile gets nothing read or written outside their home and scratch folders.

A root is `home` (the account's home; its .ssh stays the new node's own) or an absolute scratch folder of the
node (only the account's files in it). Paths are relative to the root, one name per component: no empty
component, no `.` or `..`, no NUL; any other byte, a newline included, is a name like any other.

  list --account A --root R [--root R ...] [--max-bytes N] [--max-seconds S]
        JSON: files {root, path, size, mtime_ns, mode}, skipped {root, path, why}, over_budget {root, path, size},
        stopped_at (the path where the time ran out, or ""). No file is read: a home of terabytes lists in the
        time of its folders. Files past N bytes in all are listed as over_budget; after S seconds the walk stops.
  read --account A --root R --path P --offset N --length L --out FILE    a chunk of the file into FILE (root's);
        JSON: read, size, mtime_ns (the caller sees a file that changed while it was copied)
  hash --account A --root R --path P           JSON: size, sha256 (a resumed move's file already on the spare)
  write --account A --root R --path P --offset N --from FILE [--last --size S --sha256 H --mode M]
        appends FILE at N to the path's partial copy; --last checks size and hash, gives it to the account, and
        puts it in place (a link or file there is replaced, never followed).

--users-prefix DIR: the account database and homes under DIR (the test sandbox), as access.py.
Exit 0: done (JSON on stdout); 1: refused or failed, the reason on stderr; 2: bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the node's Python may be 3.8: these shapes (the JSON printed) are for the type checker only
    from typing import NotRequired, TypedDict

    class Listed(TypedDict):
        root: str
        path: str
        size: int

    class ListedFile(Listed):
        mtime_ns: int
        mode: int

    class Skipped(TypedDict):
        root: str
        path: str
        why: str

    class Listing(TypedDict):
        files: list[ListedFile]
        skipped: list[Skipped]
        over_budget: list[Listed]
        stopped_at: str

    class FileHash(TypedDict):
        size: int
        sha256: str

    class ReadChunk(TypedDict):
        read: int
        size: int
        mtime_ns: int

    class Written(TypedDict):
        written: int
        sha256: NotRequired[str]  # the last chunk's: the whole copy's hash


HOME = "home"
PARTIAL = ".b200-move-partial-"
BLOCK = 1 << 20
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
MAX_LISTED = 200_000


class Failed(Exception):
    pass


def account_entry(account: str, prefix: str) -> tuple[int, int, str]:
    """(uid, gid, home path on this machine) from the account database (under the prefix in the sandbox)."""
    with open(os.path.join(prefix or "/", "etc/passwd"), encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.rstrip("\n").split(":")
            if len(fields) >= 7 and fields[0] == account:
                home = fields[5]
                return int(fields[2]), int(fields[3]), (prefix.rstrip("/") + home) if prefix else home
    raise Failed(f"no account {account} on this node")


def root_open(root: str, home: str) -> int:
    """The root folder's descriptor: the home, or a scratch folder that is a real folder (not a link)."""
    path = home if root == HOME else root
    if root != HOME and (not root.startswith("/") or os.path.normpath(root) != root):
        raise Failed(f"{root!r} is not a normalised absolute scratch folder")
    try:
        return os.open(path, DIR_FLAGS)
    except OSError as exc:
        raise Failed(f"{path}: {exc.strerror}") from None


def components(path: str) -> list[str]:
    parts = path.split("/")
    if not path or any(part in ("", ".", "..") or "\0" in part for part in parts):
        raise Failed(f"{path!r} is not a relative path of plain names")
    return parts


class Walk:
    """What a listing found so far, and its limits: bytes in all, and a deadline."""

    def __init__(self, uid: int, max_bytes: int, max_seconds: float) -> None:
        self.uid, self.max_bytes = uid, max_bytes
        self.deadline = time.monotonic() + max_seconds
        self.files: list[ListedFile] = []
        self.skipped: list[Skipped] = []
        self.over_budget: list[Listed] = []
        self.listed_bytes = 0
        self.stopped_at = ""

    def add(self, root: str, relative: str, info: os.stat_result) -> None:
        item: Listed = {"root": root, "path": relative, "size": info.st_size}
        if self.listed_bytes + info.st_size > self.max_bytes:
            self.over_budget.append(item)  # a sparse file counts what a copy would carry: its whole size
            return
        self.listed_bytes += info.st_size
        self.files.append({**item, "mtime_ns": info.st_mtime_ns, "mode": stat.S_IMODE(info.st_mode) & 0o777})

    def out_of_time(self, root: str, relative: str) -> bool:
        if not self.stopped_at and time.monotonic() > self.deadline:
            self.stopped_at = f"{root}:{relative}"
        return bool(self.stopped_at)


def listing(
    account: str, roots: list[str], prefix: str, max_bytes: int = 1 << 62, max_seconds: float = 3600
) -> Listing:
    uid, _, home = account_entry(account, prefix)
    walk = Walk(uid, max_bytes, max_seconds)
    for root in roots:
        try:
            fd = root_open(root, home)
        except Failed as exc:
            walk.skipped.append({"root": root, "path": "", "why": str(exc)})
            continue
        try:
            _walk(fd, root, "", walk, os.fstat(fd).st_dev)
        finally:
            os.close(fd)
    return {
        "files": walk.files,
        "skipped": walk.skipped,
        "over_budget": walk.over_budget,
        "stopped_at": walk.stopped_at,
    }


def _walk(fd: int, root: str, base: str, walk: Walk, device: int) -> None:
    files, skipped = walk.files, walk.skipped
    for entry in sorted(os.scandir(fd), key=lambda e: e.name):
        relative = f"{base}{entry.name}"
        if root == HOME and relative == ".ssh":
            continue  # the new node's own keys (the grant made them)
        if walk.out_of_time(root, relative):
            return
        if len(files) + len(walk.over_budget) >= MAX_LISTED:
            skipped.append({"root": root, "path": relative, "why": f"more than {MAX_LISTED} files"})
            return
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:
            skipped.append(
                {"root": root, "path": os.fsencode(relative).decode("utf-8", "replace"), "why": "the name is not UTF-8"}
            )
            continue
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            skipped.append({"root": root, "path": relative, "why": "a symbolic link (not followed)"})
        elif stat.S_ISDIR(info.st_mode):
            if info.st_dev != device:
                skipped.append({"root": root, "path": relative, "why": "another filesystem mounted there"})
                continue
            try:
                child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                skipped.append({"root": root, "path": relative, "why": exc.strerror or "cannot be opened"})
                continue
            try:
                _walk(child, root, relative + "/", walk, device)
            finally:
                os.close(child)
        elif not stat.S_ISREG(info.st_mode):
            skipped.append({"root": root, "path": relative, "why": "not a regular file"})
        elif info.st_uid != walk.uid:
            if root == HOME:
                skipped.append({"root": root, "path": relative, "why": "not the account's file"})
        elif entry.name.startswith(PARTIAL):
            continue  # an unfinished copy of an earlier move
        else:
            walk.add(root, relative, info)


def _file_open(account: str, root: str, path: str, prefix: str) -> tuple[int, os.stat_result]:
    """(descriptor, stat) of the account's regular file at root/path, every folder on the way opened without
    following a link."""
    uid, gid, home = account_entry(account, prefix)
    parts = components(path)
    root_fd = root_open(root, home)
    try:
        parent = _parent_open(root_fd, parts, uid, gid, create=False)
    finally:
        os.close(root_fd)
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except OSError as exc:
        raise Failed(f"{path}: {exc.strerror}") from None
    finally:
        os.close(parent)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
        os.close(fd)
        raise Failed(f"{path}: not a regular file of the account")
    return fd, info


def file_hash(account: str, root: str, path: str, prefix: str) -> FileHash:
    fd, _ = _file_open(account, root, path, prefix)
    try:
        digest, size = hashlib.sha256(), 0
        for block in iter(lambda: os.read(fd, BLOCK), b""):
            digest.update(block)
            size += len(block)
        return {"size": size, "sha256": digest.hexdigest()}
    finally:
        os.close(fd)


def _parent_open(root_fd: int, parts: list[str], uid: int, gid: int, create: bool) -> int:
    """The descriptor of the folder that holds the last component, each folder opened without following links;
    missing folders made for the account when `create`. A folder on the way owned by someone else is refused."""
    fd = os.dup(root_fd)
    for part in parts[:-1]:
        try:
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                os.close(fd)
                raise Failed(f"{'/'.join(parts)}: no such file") from None
            os.mkdir(part, 0o700, dir_fd=fd)
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.fchown(child, uid, gid)
        except OSError as exc:
            os.close(fd)
            raise Failed(f"{'/'.join(parts)}: {part} is not a folder ({exc.strerror})") from None
        os.close(fd)
        fd = child
        if os.fstat(fd).st_uid != uid:
            os.close(fd)
            raise Failed(f"{'/'.join(parts)}: the folder {part} is not the account's")
    return fd


def read_chunk(account: str, root: str, path: str, offset: int, length: int, out: str, prefix: str) -> ReadChunk:
    fd, info = _file_open(account, root, path, prefix)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        target = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        written = 0
        try:
            while written < length:
                block = os.read(fd, min(BLOCK, length - written))
                if not block:
                    break
                os.write(target, block)
                written += len(block)
        finally:
            os.close(target)
        after = os.fstat(fd)
        return {"read": written, "size": after.st_size, "mtime_ns": max(info.st_mtime_ns, after.st_mtime_ns)}
    finally:
        os.close(fd)


def write_chunk(args: argparse.Namespace) -> Written:
    uid, gid, home = account_entry(args.account, args.users_prefix)
    parts = components(args.path)
    partial = PARTIAL + hashlib.sha256(args.path.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    root_fd = root_open(args.root, home)
    try:
        parent = _parent_open(root_fd, parts, uid, gid, create=True)
    finally:
        os.close(root_fd)
    try:
        flags = os.O_RDWR | os.O_NOFOLLOW | (os.O_CREAT | os.O_TRUNC if args.offset == 0 else 0)
        try:
            fd = os.open(partial, flags, 0o600, dir_fd=parent)
        except OSError as exc:
            raise Failed(f"{args.path}: its partial copy cannot be opened ({exc.strerror})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != 0 or info.st_nlink != 1:
                raise Failed(f"{args.path}: its partial copy was tampered with")
            if info.st_size != args.offset:
                raise Failed(f"{args.path}: the partial copy holds {info.st_size} bytes, not {args.offset}")
            os.lseek(fd, args.offset, os.SEEK_SET)
            with open(args.source, "rb") as source:
                for block in iter(lambda: source.read(BLOCK), b""):
                    os.write(fd, block)
            if not args.last:
                return {"written": os.fstat(fd).st_size}
            return _finish(fd, parent, partial, parts[-1], args, uid, gid)
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def _finish(fd: int, parent: int, partial: str, name: str, args: argparse.Namespace, uid: int, gid: int) -> Written:
    os.fsync(fd)
    os.lseek(fd, 0, os.SEEK_SET)
    digest, size = hashlib.sha256(), 0
    for block in iter(lambda: os.read(fd, BLOCK), b""):
        digest.update(block)
        size += len(block)
    if size != args.size or digest.hexdigest() != args.sha256:
        os.unlink(partial, dir_fd=parent)
        raise Failed(f"{args.path}: the copy does not match ({size} bytes, sha256 {digest.hexdigest()})")
    os.fchown(fd, uid, gid)
    os.fchmod(fd, args.mode & 0o777)
    try:
        existing = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        os.unlink(partial, dir_fd=parent)
        raise Failed(f"{args.path}: a folder of that name is there on this node")
    os.rename(partial, name, src_dir_fd=parent, dst_dir_fd=parent)  # replaces a link or file, never follows it
    return {"written": size, "sha256": digest.hexdigest()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="move_files.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("list", "read", "write", "hash"):
        command = commands.add_parser(name)
        command.add_argument("--account", required=True)
        command.add_argument("--users-prefix", default="")
        command.add_argument("--root", action="append", required=True)
        if name == "list":
            command.add_argument("--max-bytes", type=int, default=1 << 62)
            command.add_argument("--max-seconds", type=float, default=3600)
        else:
            command.add_argument("--path", required=True)
            command.add_argument("--offset", type=int, default=0)
        if name == "read":
            command.add_argument("--length", type=int, required=True)
            command.add_argument("--out", required=True)
        if name == "write":
            command.add_argument("--from", dest="source", required=True)
            command.add_argument("--last", action="store_true")
            command.add_argument("--size", type=int, default=-1)
            command.add_argument("--sha256", default="")
            command.add_argument("--mode", type=lambda text: int(text, 8), default=0o600)
    args = parser.parse_args(argv)
    result: Listing | FileHash | ReadChunk | Written
    try:
        if args.command == "list":
            result = listing(args.account, args.root, args.users_prefix, args.max_bytes, args.max_seconds)
        elif args.command == "hash":
            result = file_hash(args.account, args.root[0], args.path, args.users_prefix)
        elif args.command == "read":
            result = read_chunk(
                args.account, args.root[0], args.path, args.offset, args.length, args.out, args.users_prefix
            )
        else:
            args.root = args.root[0]
            result = write_chunk(args)
    except Failed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
