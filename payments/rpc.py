"""The one door to EVM JSON-RPC: several URLs per network, failover, backoff, and stale-head detection.

Responses are decoded by hand (hex strings to ints): web3.py's formatters cost more than the call.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings

log = logging.getLogger(__name__)
_ids = itertools.count(1)


class RpcError(Exception):
    """A JSON-RPC failure."""


class RpcUnavailable(RpcError):
    """No URL gave a usable answer (down, timing out, rate limiting, or a stale head): transient."""


class RpcResponseError(RpcError):
    """A node answered with a JSON-RPC error object."""


class StaleHead(RpcError):
    pass


@dataclass(frozen=True)
class Head:
    number: int
    hash: str
    timestamp: int


class _Backoff:
    """Per-URL cool-down after a failure, shared by every client of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}
        self._failures: dict[str, int] = {}

    def order(self, urls: list[str]) -> list[str]:
        """URLs not cooling down first, in configured order; the cooling ones last, as a last resort."""
        now = time.monotonic()
        with self._lock:
            ready = [url for url in urls if self._until.get(url, 0) <= now]
            cooling = sorted((url for url in urls if url not in ready), key=lambda url: self._until[url])
        return ready + cooling

    def failed(self, url: str, *, at_least: float = 0.0) -> None:
        with self._lock:
            failures = self._failures.get(url, 0) + 1
            self._failures[url] = failures
            self._until[url] = time.monotonic() + max(at_least, min(60.0, 0.5 * 2 ** (failures - 1)))

    def succeeded(self, url: str) -> None:
        with self._lock:
            self._failures.pop(url, None)
            self._until.pop(url, None)


BACKOFF = _Backoff()


def hex_int(value: str | None) -> int | None:
    return None if value is None else int(value, 16)


class RpcClient:
    def __init__(self, urls: list[str], *, timeout: float | None = None, max_head_age: int = 0) -> None:
        if not urls:
            raise RpcUnavailable("no RPC URL configured")
        self.urls = urls
        self.timeout = timeout if timeout is not None else settings.RPC_TIMEOUT_SECONDS
        self.max_head_age = max_head_age
        self.session = requests.Session()
        self.calls = 0  # JSON-RPC calls made (a batch of n counts n): the benchmark reads these
        self.requests = 0  # HTTP requests made
        # URLs whose head was stale: not asked again by this client (one pass), whatever they answer.
        self.excluded: set[str] = set()
        # The URL that gave the last answer: a second opinion is asked of another one (`avoid`).
        self.last_url: str | None = None

    @property
    def can_cross_check(self) -> bool:
        """Two or more URLs: what one provider says can be checked against another."""
        return len(self.urls) > 1

    def _post(self, payload: Any, check: Callable[[Any], None] | None = None, avoid: Collection[str] = ()) -> Any:
        failures = []
        for url in BACKOFF.order([url for url in self.urls if url not in self.excluded and url not in avoid]):
            self.requests += 1
            try:
                response = self.session.post(url, json=payload, timeout=self.timeout)
                if response.status_code == 429 or response.status_code >= 500:
                    raise RpcUnavailable(f"HTTP {response.status_code}")
                response.raise_for_status()
                body = response.json()
                if check is not None:
                    check(body)
            except (requests.RequestException, ValueError, RpcUnavailable, StaleHead) as exc:
                if isinstance(exc, StaleHead):
                    self.excluded.add(url)
                BACKOFF.failed(url, at_least=60.0 if isinstance(exc, StaleHead) else 0.0)
                failures.append(f"{url.split('://')[-1].split('/')[0]}: {type(exc).__name__} {exc}"[:200])
                log.warning("rpc %s failed: %s", url, exc)
                continue
            BACKOFF.succeeded(url)
            self.last_url = url
            return body
        raise RpcUnavailable("; ".join(failures) or "no RPC URL left to ask (stale heads set aside)")

    @staticmethod
    def _result(item: dict, method: str) -> Any:
        if "error" in item:
            error = item["error"]
            raise RpcResponseError(f"{method}: {error.get('message', error) if isinstance(error, dict) else error}")
        return item.get("result")

    def call(self, method: str, params: list[Any] | None = None, *, avoid: Collection[str] = ()) -> Any:
        self.calls += 1
        body = self._post({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or []}, avoid=avoid)
        return self._result(body, method)

    def batch(self, calls: list[tuple[str, list[Any]]], *, avoid: Collection[str] = ()) -> list[Any]:
        """Several calls in one HTTP request; results in the order of the calls. `avoid`: URLs not to ask."""
        if not calls:
            return []
        self.calls += len(calls)
        ids = [next(_ids) for _ in calls]
        payload = [
            {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
            for call_id, (method, params) in zip(ids, calls, strict=True)
        ]
        body = self._post(payload, avoid=avoid)
        if not isinstance(body, list):
            raise RpcResponseError(f"batch answered with {type(body).__name__}: {str(body)[:200]}")
        by_id = {item.get("id"): item for item in body}
        return [self._result(by_id.get(call_id, {}), method) for call_id, (method, _p) in zip(ids, calls, strict=True)]

    def head(self, *, avoid: Collection[str] = ()) -> Head:
        """The latest block; a URL whose head is older than max_head_age counts as down."""
        self.calls += 1

        def fresh(body: dict) -> None:
            block = body.get("result")
            if not block:
                raise RpcUnavailable("no latest block")
            age = time.time() - int(block["timestamp"], 16)
            if self.max_head_age and age > self.max_head_age:
                raise StaleHead(f"head {int(block['number'], 16)} is {int(age)} s old")

        body = self._post(
            {"jsonrpc": "2.0", "id": next(_ids), "method": "eth_getBlockByNumber", "params": ["latest", False]},
            check=fresh,
            avoid=avoid,
        )
        block = self._result(body, "eth_getBlockByNumber")
        return Head(number=int(block["number"], 16), hash=block["hash"], timestamp=int(block["timestamp"], 16))

    def block_number(self) -> int:
        return int(self.call("eth_blockNumber"), 16)

    def chain_id(self) -> int:
        return int(self.call("eth_chainId"), 16)

    def tagged_block_number(self, tag: str, *, avoid: Collection[str] = ()) -> int | None:
        """The number of the `safe` or `finalized` block; None where the node doesn't know the tag."""
        try:
            block = self.call("eth_getBlockByNumber", [tag, False], avoid=avoid)
        except RpcResponseError:
            return None
        return hex_int(block["number"]) if block else None
