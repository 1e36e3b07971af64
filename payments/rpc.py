"""The one door to EVM JSON-RPC: several URLs per network, failover, backoff, and stale-head detection.

Responses are decoded by hand (hex strings to ints): web3.py's formatters cost more than the call.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings

from payments.log_ranges import RANGE_REFUSED

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


class ProviderRefused(RpcUnavailable):
    """A provider answered a call with an error that is not about the call (a method its plan does not serve, an
    internal error): the call goes to the next provider, and this one is backed off."""


class SlowOrLargeAnswer(RpcUnavailable):
    """An answer past the request's deadline (RPC_ANSWER_DEADLINE_SECONDS) or size (RPC_MAX_ANSWER_BYTES)."""


class RateLimited(RpcUnavailable):
    """HTTP 429 (or a JSON-RPC "too many requests"): the provider asks to wait `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BatchRefused(RpcError):
    """The provider would not answer this batch whole: too large, batches refused, or calls left out."""


# A JSON-RPC error that means "too many requests", not "this request is wrong" (Infura's -32005 also caps
# results: those messages name results or a range, and are not this).
RATE_LIMIT_MESSAGE = re.compile(r"too many requests|rate.?limit|limit exceeded|exceeded .*(credits|capacity)", re.I)
# A batch whose answer would be too large: geth (and Base's node) answer the calls past its
# --rpc.batch-response-max-size with -32003 "response too large"; others name the response size.
RESPONSE_TOO_LARGE = re.compile(
    r"response (is )?too (large|big)|response size (exceeded|too)|exceeds? .*response", re.I
)


def _retry_after(response: requests.Response) -> float:
    """The provider's Retry-After in seconds (a number; a date or nothing reads as 1 s), at most the setting."""
    try:
        wait = float(response.headers.get("Retry-After", "1"))
    except ValueError:
        wait = 1.0
    return max(0.0, min(wait, settings.RPC_RETRY_AFTER_MAX_SECONDS))


class _BatchSizes:
    """The largest batch each provider (URL list) answered whole, shared by the process; none known: any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sizes: dict[tuple[str, ...], int] = {}

    def get(self, key: tuple[str, ...], wanted: int) -> int:
        with self._lock:
            return min(wanted, self._sizes.get(key, wanted))

    def refused(self, key: tuple[str, ...], size: int) -> int:
        """The size to try next after a refusal of `size`: half, down to single calls."""
        smaller = max(1, size // 2)
        with self._lock:
            self._sizes[key] = min(self._sizes.get(key, smaller), smaller)
        return smaller

    def forget(self) -> None:
        """No size known (tests: what one learnt never reaches the next)."""
        with self._lock:
            self._sizes.clear()


BATCH_SIZES = _BatchSizes()


def provider_name(url: str) -> str:
    """A provider as /metrics and the logs name it: the host (and port), never the path or user part, where
    providers put the API key."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


@dataclass
class ProviderTally:
    """What one client asked of one provider: the daily budget is spent in calls (a batch of n is n calls
    for the providers' credits), HTTP requests, and bytes of answers."""

    calls: int = 0
    requests: int = 0
    response_bytes: int = 0
    rate_limited: int = 0


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

    def failures(self, url: str) -> int:
        """Failures in a row of the URL (0 once it answered again)."""
        with self._lock:
            return self._failures.get(url, 0)

    def succeeded(self, url: str) -> None:
        with self._lock:
            self._failures.pop(url, None)
            self._until.pop(url, None)


BACKOFF = _Backoff()


def _raise_if_rate_limited(body: Any) -> None:
    """A 200 whose single answer (or a batch's every answer) is a "too many requests" error."""
    answers = body if isinstance(body, list) else [body]
    errors = [a["error"] for a in answers if isinstance(a, dict) and isinstance(a.get("error"), dict)]
    limited = [e for e in errors if RATE_LIMIT_MESSAGE.search(str(e.get("message")))]
    if answers and len(limited) == len(answers):
        wait = min(1.0, settings.RPC_RETRY_AFTER_MAX_SECONDS)  # no Retry-After in a JSON-RPC error: a second
        raise RateLimited(f"JSON-RPC {errors[0].get('code')}: {errors[0].get('message')}"[:200], wait)


# Errors about the call itself, which any provider would give: a reverted call, and the range or answer-size
# refusals that payments.log_ranges and batch() answer by asking for less. Any other error in an answer is the
# provider not serving the call (issue 39: a provider without eth_getLogs stayed first and failed every pass).
REVERTED = re.compile(r"revert", re.I)


def _about_the_call(message: str) -> bool:
    return any(pattern.search(message) for pattern in (REVERTED, RANGE_REFUSED, RESPONSE_TOO_LARGE, RATE_LIMIT_MESSAGE))


def _raise_if_refused(payload: Any, body: Any) -> None:
    """ProviderRefused when an answer holds an error that is not about its call. A batch refused whole (an error
    object for a list) is left to batch(), which splits it."""
    if isinstance(payload, list) != isinstance(body, list):
        return
    for answer in body if isinstance(body, list) else [body]:
        error = answer.get("error") if isinstance(answer, dict) else None
        if error is None:
            continue
        message = str(error.get("message", error) if isinstance(error, dict) else error)
        if not _about_the_call(message):
            code = error.get("code") if isinstance(error, dict) else None
            raise ProviderRefused(f"JSON-RPC {code}: {message}"[:200])


def hex_int(value: str | None) -> int | None:
    return None if value is None else int(value, 16)


class RpcClient:
    def __init__(self, urls: list[str], *, timeout: float | None = None, max_head_age: int = 0) -> None:
        if not urls:
            raise RpcUnavailable("no RPC URL configured")
        self.urls = urls
        self.timeout = timeout if timeout is not None else settings.RPC_TIMEOUT_SECONDS
        # The whole answer within this (a provider that drips bytes never trips the read timeout) and this size.
        self.deadline = float(settings.RPC_ANSWER_DEADLINE_SECONDS)
        self.max_answer_bytes = settings.RPC_MAX_ANSWER_BYTES
        self.max_head_age = max_head_age
        self.session = requests.Session()
        self.calls = 0  # JSON-RPC calls made (a batch of n counts n): the benchmark reads these
        self.requests = 0  # HTTP requests made
        self.rate_limited = 0  # answers that were HTTP 429 (or "too many requests"), waited out or moved past
        self.response_bytes = 0  # bytes of answers: the benchmark reads these too
        # URLs whose head was stale: not asked again by this client (one pass), whatever they answer.
        self.excluded: set[str] = set()
        # The URL that gave the last answer: a second opinion is asked of another one (`avoid`).
        self.last_url: str | None = None
        self.usage: dict[str, ProviderTally] = {}  # provider_name -> what was asked of it, not yet recorded

    def _tally(self, url: str) -> ProviderTally:
        return self.usage.setdefault(provider_name(url), ProviderTally())

    def usage_take(self) -> dict[str, ProviderTally]:
        """What was asked of each provider since the last take: recorded once, however often a client is reused."""
        usage, self.usage = self.usage, {}
        return usage

    @property
    def can_cross_check(self) -> bool:
        """Two or more URLs: what one provider says can be checked against another."""
        return len(self.urls) > 1

    def _post(self, payload: Any, check: Callable[[Any], None] | None = None, avoid: Collection[str] = ()) -> Any:
        """One request, to the first provider that answers. A provider that rate-limits is moved past; when every
        one did, the shortest `Retry-After` is waited out (bounded) and the request asked again, a few times, so a
        pass goes on through bursts of 429 instead of failing."""
        retries = 0
        while True:
            try:
                return self._post_once(payload, check, avoid)
            except RateLimited as exc:
                retries += 1
                if retries > settings.RPC_RATE_LIMIT_RETRIES:
                    raise
                time.sleep(exc.retry_after)

    def _post_once(self, payload: Any, check: Callable[[Any], None] | None, avoid: Collection[str]) -> Any:
        failures, waits, refusals = [], [], []
        for url in BACKOFF.order([url for url in self.urls if url not in self.excluded and url not in avoid]):
            self.requests += 1
            tally = self._tally(url)
            tally.requests += 1
            tally.calls += len(payload) if isinstance(payload, list) else 1
            try:
                response, content = self._fetch(url, payload)
                tally.response_bytes += len(content)
                self.response_bytes += len(content)
                if response.status_code == 429:
                    raise RateLimited("HTTP 429", _retry_after(response))
                if response.status_code >= 500:
                    raise RpcUnavailable(f"HTTP {response.status_code}")
                response.raise_for_status()
                body = json.loads(content)
                _raise_if_rate_limited(body)
                _raise_if_refused(payload, body)
                if check is not None:
                    check(body)
            except (requests.RequestException, ValueError, RpcUnavailable, StaleHead) as exc:
                if isinstance(exc, ProviderRefused):
                    refusals.append(str(exc))
                if isinstance(exc, StaleHead):
                    self.excluded.add(url)
                if isinstance(exc, RateLimited):
                    self.rate_limited += 1
                    tally.rate_limited += 1
                    waits.append(exc.retry_after)
                BACKOFF.failed(url, at_least=60.0 if isinstance(exc, StaleHead) else 0.0)
                failures.append(f"{provider_name(url)}: {type(exc).__name__} {exc}"[:200])
                log.warning("rpc %s failed: %s", provider_name(url), exc)
                continue
            BACKOFF.succeeded(url)
            self.last_url = url
            return body
        message = "; ".join(failures) or "no RPC URL left to ask (stale heads set aside)"
        if waits and len(waits) == len(failures):  # every provider asked to wait: not down
            raise RateLimited(f"rate-limited: {message}", min(waits))
        if refusals and len(refusals) == len(failures):  # every provider answered the same way: the call's error
            raise RpcResponseError(refusals[0])
        raise RpcUnavailable(message)

    def _fetch(self, url: str, payload: Any) -> tuple[requests.Response, bytes]:
        """The provider's answer, read within the deadline and the size bound (SlowOrLargeAnswer past either)."""
        deadline = time.monotonic() + self.deadline
        with self.session.post(url, json=payload, timeout=self.timeout, stream=True) as response:
            chunks, size = [], 0
            while chunk := response.raw.read1(65536, decode_content=True):  # what has arrived, never waiting for more
                size += len(chunk)
                if size > self.max_answer_bytes:
                    raise SlowOrLargeAnswer(f"answer over {self.max_answer_bytes} bytes")
                if time.monotonic() > deadline:
                    raise SlowOrLargeAnswer(f"answer not complete within {self.deadline:g} s")
                chunks.append(chunk)
        return response, b"".join(chunks)

    @staticmethod
    def _result(item: dict[str, Any], method: str) -> Any:
        if "error" in item:
            error = item["error"]
            raise RpcResponseError(f"{method}: {error.get('message', error) if isinstance(error, dict) else error}")
        return item.get("result")

    def call(self, method: str, params: list[Any] | None = None, *, avoid: Collection[str] = ()) -> Any:
        self.calls += 1
        body = self._post({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or []}, avoid=avoid)
        return self._result(body, method)

    def batch(self, calls: list[tuple[str, list[Any]]], *, avoid: Collection[str] = ()) -> list[Any]:
        """Several calls in as few HTTP requests as the provider takes; results in the order of the calls.
        A batch the provider will not answer whole (too large, batches refused, calls left out of the answer)
        is split in halves, down to single calls, and the size that worked is remembered for the provider.
        A call whose result is missing is an error, never a None. `avoid`: URLs not to ask."""
        key = tuple(self.urls)
        results: list[Any] = []
        size = BATCH_SIZES.get(key, len(calls))
        while len(results) < len(calls):
            chunk = calls[len(results) : len(results) + size]
            try:
                results += self._batch_once(chunk, avoid)
            except BatchRefused as exc:
                if size == 1:
                    raise RpcResponseError(str(exc)) from None
                size = BATCH_SIZES.refused(key, len(chunk))
                log.info("rpc batch of %d refused (%s): %d at a time from now on", len(chunk), exc, size)
        return results

    def _batch_once(self, calls: list[tuple[str, list[Any]]], avoid: Collection[str]) -> list[Any]:
        if len(calls) == 1:  # a single call needs no batch: providers that refuse batches answer it
            method, params = calls[0]
            return [self.call(method, params, avoid=avoid)]
        self.calls += len(calls)
        ids = [next(_ids) for _ in calls]
        payload = [
            {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
            for call_id, (method, params) in zip(ids, calls, strict=True)
        ]
        body = self._post(payload, avoid=avoid)
        if not isinstance(body, list):  # "batch too large", "batch requests are not supported"
            raise BatchRefused(f"batch of {len(calls)} answered with {str(body)[:200]}")
        by_id = {item.get("id"): item for item in body if isinstance(item, dict)}
        if any(call_id not in by_id for call_id in ids):
            raise BatchRefused(f"batch of {len(calls)} answered {len(by_id)} of its calls")
        too_large = [item for item in by_id.values() if RESPONSE_TOO_LARGE.search(str(item.get("error") or ""))]
        if too_large:  # the answer would pass the provider's size cap: fewer calls at a time
            raise BatchRefused(f"batch of {len(calls)}: {str(too_large[0]['error'])[:200]}")
        return [self._result(by_id[call_id], method) for call_id, (method, _p) in zip(ids, calls, strict=True)]

    def head(self, *, avoid: Collection[str] = ()) -> Head:
        """The latest block; a URL whose head is older than max_head_age counts as down."""
        self.calls += 1

        def fresh(body: dict[str, Any]) -> None:
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
