"""What each RPC provider was asked, added to its row after every scan pass (/metrics reads the rows)."""

from __future__ import annotations

from django.db.models import F

from payments.models import Network, ProviderUsage
from payments.rpc import RpcClient


def provider_usage_record(*, network: Network, client: RpcClient) -> None:
    """Adds what `client` asked of each provider since its last record; an increment in the database, so that
    every worker's passes add up."""
    for provider, tally in client.usage_take().items():
        ProviderUsage.objects.get_or_create(network=network, provider=provider)
        ProviderUsage.objects.filter(network=network, provider=provider).update(
            calls=F("calls") + tally.calls,
            requests=F("requests") + tally.requests,
            response_bytes=F("response_bytes") + tally.response_bytes,
            rate_limited=F("rate_limited") + tally.rate_limited,
        )
