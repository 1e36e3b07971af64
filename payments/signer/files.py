"""Reading a file of the treasurer's that decides where money goes (the mnemonic, the pins): refused when it is a
link, not a regular file, or open to others in the forbidden mode bits, and the bytes read are the ones checked."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from payments.signer.plan import PlanError


def read_guarded(path: Path, *, what: str, forbidden: int, too_open: str) -> str:
    """The file's text. `forbidden`: the mode bits that refuse it; `too_open`: the words saying why, with `{mode}`."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise PlanError(f"cannot read the {what} {path}: {error}") from error
    if not stat.S_ISREG(info.st_mode):
        raise PlanError(f"the {what} {path} is not a regular file (a link or a device is refused)")
    if info.st_mode & forbidden:
        raise PlanError(f"the {what} {path} is {too_open.format(mode=f'{info.st_mode & 0o777:o}')}")
    # O_NOFOLLOW, then fstat: the file read is the one checked, even if the path changed in between.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise PlanError(f"cannot read the {what} {path}: {error}") from error
    with os.fdopen(fd, encoding="utf-8") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode) or opened.st_mode & forbidden or opened.st_ino != info.st_ino:
            raise PlanError(f"the {what} {path} changed while it was read")
        try:
            return handle.read()
        except (OSError, UnicodeDecodeError) as error:
            raise PlanError(f"cannot read the {what} {path}: {error}") from error
