"""/healthz: a JSON report of the database, the broker and each network's RPC and verifier.

It answers within a few seconds whatever is down: the broker and each RPC URL get short timeouts, they
are probed in parallel under one deadline, and a network that is down never fails the report
(the web process is healthy; checkout just stops offering that network). `ok` (and the 503) is the
database and the broker only: what the web process and the workers cannot work without.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from functools import partial
from typing import NotRequired, TypedDict

from django.db import connection
from django.http import HttpRequest, JsonResponse

from config.celery import app as celery_app
from payments.models import Network
from payments.networks import rpc_client, rpc_urls, single_provider_warning
from payments.rpc import RpcError

BROKER_TIMEOUT_SECONDS = 2
# Per RPC request: connecting, then reading the answer. A network with several URLs tries each in turn.
RPC_TIMEOUT_SECONDS = (1.0, 2.0)
# The whole report: the broker and the networks are probed in parallel under this deadline.
DEADLINE_SECONDS = 3.0


class RpcDetail(TypedDict):
    """What a network's RPC probe found, beyond its being up."""

    block: int  # the chain's height


class Check(TypedDict):
    """One probe's outcome: up, or the class of the exception that stopped it ("Timeout" past the deadline)."""

    ok: bool
    error: NotRequired[str]
    block: NotRequired[int]  # a network's RPC: RpcDetail


class Verifier(TypedDict):
    """What the last scan pass saw of a network (`ok` None: no pass yet)."""

    ok: bool | None
    error: str
    checked_at: dt.datetime | None
    head_block: int | None
    providers: int
    warning: str | None


class NetworkCheck(Check):
    verifier: Verifier


def _check(probe: Callable[[], RpcDetail | None]) -> Check:
    try:
        detail = probe()
    except Exception as exc:  # a health page reports every failure instead of raising it
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True} if detail is None else {"ok": True, "block": detail["block"]}


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    # Redis that accepts connections but never answers must not hang the report: socket timeouts too.
    timeouts = {"socket_timeout": BROKER_TIMEOUT_SECONDS, "socket_connect_timeout": BROKER_TIMEOUT_SECONDS}
    with celery_app.connection_for_write(connect_timeout=BROKER_TIMEOUT_SECONDS, transport_options=timeouts) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=BROKER_TIMEOUT_SECONDS)


def _rpc_probe(network: Network) -> RpcDetail:
    """The chain id and the height in one batched request per URL; no database access (it runs in a thread)."""
    client = rpc_client(network)
    # requests takes a (connect, read) pair; RpcClient.timeout is typed float alone (payments/rpc.py, not this file).
    client.timeout = RPC_TIMEOUT_SECONDS  # type: ignore[assignment]
    client.deadline = sum(RPC_TIMEOUT_SECONDS)  # a provider that drips its answer holds the report no longer
    chain_id, block = client.batch([("eth_chainId", []), ("eth_blockNumber", [])])
    if int(chain_id, 16) != network.chain_id:
        raise RpcError("wrong chain id")
    return {"block": int(block, 16)}


def _outcome(future: Future[Check], deadline: float) -> Check:
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FuturesTimeout:
        return {"ok": False, "error": "Timeout"}


def _verifier(network: Network) -> Verifier:
    """What the last scan pass saw: a network marked down is hidden at checkout."""
    return {
        "ok": network.rpc_ok,
        "error": network.rpc_error,
        "checked_at": network.rpc_checked_at,
        "head_block": network.head_block,
        "providers": len(rpc_urls(network)),
        "warning": single_provider_warning(network),
    }


def healthz(request: HttpRequest) -> JsonResponse:
    # The broker and every network are probed in parallel, each under its own short timeouts, and
    # all of them under one deadline; a probe still running then is reported as timed out.
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="healthz")
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        broker = pool.submit(_check, _broker)
        database = _check(_database)
        networks: list[tuple[Network, Future[Check]]] = []
        if database["ok"]:  # networks are rows of the database: none to report without it
            # Every enabled network with RPC URLs, including one the verifier has taken off checkout.
            enabled = Network.objects.filter(enabled=True).order_by("slug")
            configured = [network for network in enabled if rpc_urls(network)]
            networks = [(network, pool.submit(_check, partial(_rpc_probe, network))) for network in configured]
        broker_check = _outcome(broker, deadline)
        network_checks: dict[str, NetworkCheck] = {
            network.slug: {**_outcome(probe, deadline), "verifier": _verifier(network)} for network, probe in networks
        }
        report = {"database": database, "broker": broker_check, "networks": network_checks}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a slow URL finishes on its own timeout
    ok = database["ok"] and broker_check["ok"]
    return JsonResponse({"ok": ok, **report}, status=200 if ok else 503)
