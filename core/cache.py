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

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
HUNG = (RedisTimeoutError, TimeoutError)  # it answered nothing in time (a refused connection fails at once)
HUNG_PAUSE_SECONDS = 5.0


def _forgiving(default):
    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            if self._paused_until > time.monotonic():
                return default(*args, **kwargs) if callable(default) else default
            try:
                answer = method(self, *args, **kwargs)
            except UNREACHABLE as exc:
                if not self._down:
                    log.warning("cache unreachable, serving without it: %s", exc)
                self._down = True
                if isinstance(exc, HUNG):
                    self._paused_until = time.monotonic() + HUNG_PAUSE_SECONDS
                return default(*args, **kwargs) if callable(default) else default
            if self._down:
                log.warning("cache reachable again")
                self._down = False
            return answer

        return call

    return wrap


def _default_of_get(key, default=None, *args, **kwargs):
    return default


class ForgivingRedisCache(RedisCache):
    _down = False
    _paused_until = 0.0

    get = _forgiving(_default_of_get)(RedisCache.get)
    get_many = _forgiving(dict)(RedisCache.get_many)
    has_key = _forgiving(False)(RedisCache.has_key)
    add = _forgiving(False)(RedisCache.add)
    set = _forgiving(None)(RedisCache.set)
    set_many = _forgiving(list)(RedisCache.set_many)
    touch = _forgiving(False)(RedisCache.touch)
    delete = _forgiving(False)(RedisCache.delete)
    delete_many = _forgiving(None)(RedisCache.delete_many)
    incr = _forgiving(0)(RedisCache.incr)
    clear = _forgiving(None)(RedisCache.clear)
