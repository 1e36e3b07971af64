"""Where a network's JSON-RPC is: CHAIN_RPC_URLS_<SLUG> from the environment, and a client for it. Below the
quotes, the price feeds and the offer (payments.networks re-exports these names)."""

from __future__ import annotations

import os

from django.conf import settings

from payments.models import Network
from payments.rpc import RpcClient


def rpc_env_name(slug: str) -> str:
    return "CHAIN_RPC_URLS_" + slug.upper().replace("-", "_")


def rpc_urls(network: Network) -> list[str]:
    """Comma-separated URLs from CHAIN_RPC_URLS_<SLUG>; the local chain has a default."""
    raw = os.environ.get(rpc_env_name(network.slug))
    if raw is None and network.slug == "local":
        raw = settings.DEFAULT_LOCAL_RPC_URL
    return [url.strip() for url in (raw or "").split(",") if url.strip()]


def rpc_client(network: Network) -> RpcClient:
    return RpcClient(rpc_urls(network), max_head_age=network.max_head_age_seconds)


SINGLE_PROVIDER_WARNING = "one provider: its word is not checked by a second (set two URLs from two providers)"


def single_provider_warning(network: Network) -> str | None:
    """Said in /healthz and the admin's network list where one URL is configured: a credit then rests on that
    provider's word alone (payments.reconfirm asks a second one before a credit is final)."""
    return SINGLE_PROVIDER_WARNING if len(rpc_urls(network)) == 1 else None
