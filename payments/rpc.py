"""The one door to EVM JSON-RPC: several URLs per network, the first that answers is used."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import requests
from django.conf import settings

log = logging.getLogger(__name__)
_ids = itertools.count(1)


class RpcError(Exception):
    """Every URL failed, or a node answered with a JSON-RPC error."""


class RpcClient:
    def __init__(self, urls: list[str], timeout: float | None = None) -> None:
        if not urls:
            raise RpcError("no RPC URL configured")
        self.urls = urls
        self.timeout = timeout if timeout is not None else settings.RPC_TIMEOUT_SECONDS
        self.session = requests.Session()

    def call(self, method: str, params: list[Any] | None = None) -> Any:
        payload = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or []}
        failures = []
        for url in self.urls:
            try:
                response = self.session.post(url, json=payload, timeout=self.timeout)
                response.raise_for_status()
                body = response.json()
            except (requests.RequestException, ValueError) as exc:
                failures.append(f"{url}: {type(exc).__name__}")
                log.warning("rpc %s failed on %s: %s", method, url, exc)
                continue
            if "error" in body:
                raise RpcError(f"{method}: {body['error'].get('message', body['error'])}")
            return body.get("result")
        raise RpcError(f"{method}: no RPC URL answered ({'; '.join(failures)})")

    def block_number(self) -> int:
        return int(self.call("eth_blockNumber"), 16)

    def chain_id(self) -> int:
        return int(self.call("eth_chainId"), 16)
