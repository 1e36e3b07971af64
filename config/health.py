"""/healthz: a JSON report of the database, the broker and each offered network's RPC."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse

from config.celery import app as celery_app
from payments.models import Network
from payments.networks import rpc_client, rpc_urls
from payments.rpc import RpcError


def _check(probe) -> dict:
    try:
        detail = probe()
    except Exception as exc:  # a health page reports every failure instead of raising it
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, **(detail or {})}


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


def healthz(request: HttpRequest) -> JsonResponse:
    networks = {}
    # Every network the shop would offer, including one the verifier has taken off checkout.
    for network in (network for network in Network.objects.filter(enabled=True) if rpc_urls(network)):
        client = rpc_client(network)
        client.timeout = 2

        def probe(client=client, network=network) -> dict:
            if client.chain_id() != network.chain_id:
                raise RpcError("wrong chain id")
            return {"block": client.block_number()}

        networks[network.slug] = {
            **_check(probe),
            # What the last scan pass saw: a network marked down is hidden at checkout.
            "verifier": {"ok": network.rpc_ok, "error": network.rpc_error, "checked_at": network.rpc_checked_at},
        }
    report = {"database": _check(_database), "broker": _check(_broker), "networks": networks}
    ok = report["database"]["ok"] and report["broker"]["ok"]
    return JsonResponse({"ok": ok, **report}, status=200 if ok else 503)
