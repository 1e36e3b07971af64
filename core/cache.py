"""The shared cache (CACHE_URL) as a help, never a dependency: Redis down or hung, the shop keeps serving.

Pages, the catalog API and the rate limits read the cache on every request. Django's RedisCache raises
when Redis cannot be reached, which would turn a cache outage into 500s everywhere. Here a read answers
"not cached" (the caller reads the database), a write is dropped, a counter reads 0 (rate limits fail
open for the outage), and one warning is logged per outage. Short socket timeouts keep a hung Redis from
holding requests, and after one of them this process leaves the cache alone for HUNG_PAUSE_SECONDS: a page
makes a dozen cache calls, and each would otherwise wait out its own timeout.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
HUNG = (RedisTimeoutError, TimeoutError)  # it answered nothing in time (a refused connection fails at once)
HUNG_PAUSE_SECONDS = 5.0


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _forgiving(
    method: Callable[Concatenate[RedisCache, _P], _R], default: Callable[..., _R]
) -> Callable[Concatenate[ForgivingRedisCache, _P], _R]:
    """`method`, answering `default(*args, **kwargs)` (called with the method's own arguments) instead of raising
    while the cache cannot be reached."""

    def call(self: ForgivingRedisCache, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self._paused_until > time.monotonic():
            return default(*args, **kwargs)
        try:
            answer = method(self, *args, **kwargs)
        except UNREACHABLE as exc:
            if not self._down:
                log.warning("cache unreachable, serving without it: %s", exc)
            self._down = True
            if isinstance(exc, HUNG):
                self._paused_until = time.monotonic() + HUNG_PAUSE_SECONDS
            return default(*args, **kwargs)
        if self._down:
            log.warning("cache reachable again")
            self._down = False
        return answer

    functools.update_wrapper(call, method)  # as @functools.wraps, which typeshed types as no plain callable
    return call


def _always(value: _R) -> Callable[..., _R]:
    """A default that answers `value`, whatever the call's arguments."""

    def answer(*_args: object, **_kwargs: object) -> _R:
        return value

    return answer


def _nothing_found(*_args: object, **_kwargs: object) -> dict[str, Any]:
    """get_many's answer without the cache: a new dict each call, which the caller may fill."""
    return {}


def _default_of_get(key: object, default: object = None, *args: object, **kwargs: object) -> object:
    return default


class ForgivingRedisCache(RedisCache):
    _down = False
    _paused_until = 0.0

    get = _forgiving(RedisCache.get, _default_of_get)
    get_many = _forgiving(RedisCache.get_many, _nothing_found)
    has_key = _forgiving(RedisCache.has_key, _always(False))
    add = _forgiving(RedisCache.add, _always(False))
    set = _forgiving(RedisCache.set, _always(None))
    set_many = _forgiving(RedisCache.set_many, list)
    touch = _forgiving(RedisCache.touch, _always(False))
    delete = _forgiving(RedisCache.delete, _always(False))
    delete_many = _forgiving(RedisCache.delete_many, _always(None))
    incr = _forgiving(RedisCache.incr, _always(0))
    clear = _forgiving(RedisCache.clear, _always(None))
