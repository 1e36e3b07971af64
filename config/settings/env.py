"""Reading settings from the environment, failing loudly on a bad value."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_share(name: str, default: str) -> str:
    """A count (`4`) or a share (`50%`), checked: at least 1, a share above 0 and at most 100 %."""
    raw = os.environ.get(name, default).strip()
    number = raw[:-1] if raw.endswith("%") else raw
    try:
        value = float(number) if raw.endswith("%") else int(number)
    except ValueError:
        value = 0
    if (raw.endswith("%") and not 0 < value <= 100) or (not raw.endswith("%") and value < 1):
        raise ImproperlyConfigured(f"{name}={raw!r}: give a number of lots (at least 1) or a share such as 50%")
    return raw
