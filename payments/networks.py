"""Which networks and assets are offered: enabled as data, and with RPC URLs in the environment."""

from __future__ import annotations

import datetime as dt
import os

from django.conf import settings
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Prefetch, Q, QuerySet
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from payments.models import Asset, Finality, Network, Rate
from payments.price_feeds import SOURCE_PREFIX, feed_rate
from payments.quotes import fresh_rate_cutoff
from payments.rpc_config import rpc_client as rpc_client  # `as`: re-exported for callers (mypy sees it)
from payments.rpc_config import rpc_env_name as rpc_env_name
from payments.rpc_config import rpc_urls as rpc_urls
from payments.rpc_config import single_provider_warning as single_provider_warning

# Sent when a network's health record goes from up to down or back: what offers networks drops its copy.
network_health_changed = Signal()


def treasury_address(network: Network) -> str:
    """Where deposit addresses are swept on this network, lower case: TREASURY_ADDRESS_<SLUG> overrides
    TREASURY_ADDRESS; empty when neither is set (then every outflow but a refund is unexpected)."""
    raw = os.environ.get("TREASURY_ADDRESS_" + network.slug.upper().replace("-", "_")) or settings.TREASURY_ADDRESS
    return (raw or "").strip().lower()


def priceable_assets(now: dt.datetime) -> QuerySet[Asset]:
    """Enabled assets that may be quotable: stablecoins, a development chain's coin, a fresh staff rate, or a price
    feed (`feed_only`: whether it answers is known only by reading it)."""
    fresh = Rate.objects.filter(asset=OuterRef("pk"), as_of__gte=fresh_rate_cutoff(now), usd_per_unit__gt=0)
    sure = Q(usd_stable=True) | Q(network__is_development=True) | Q(fresh_rate=True)
    return (
        Asset.objects.filter(enabled=True)
        .annotate(fresh_rate=Exists(fresh.exclude(source__startswith=SOURCE_PREFIX)))
        .filter(sure | Q(price_feed__isnull=False) | Exists(fresh))
        # Asset declares feed_only (set per instance); the stubs' plugin takes the annotation for a second definition.
        .annotate(feed_only=ExpressionWrapper(~sure, output_field=BooleanField()))  # type: ignore[no-redef]
    )


def _priced(asset: Asset, network: Network, now: dt.datetime) -> bool:
    """A coin priced by its feed alone is offered only while the feed answers (a read cached for a while)."""
    if not asset.feed_only:
        return True
    asset.network = network
    return feed_rate(asset, now=now) is not None


def networks_offered() -> list[Network]:
    """Enabled networks with an RPC URL, each with its quotable assets prefetched as `offered_assets`."""
    now = timezone.now()
    assets = priceable_assets(now).order_by("symbol")
    networks = (
        Network.objects.filter(enabled=True)
        .exclude(rpc_ok=False)
        # Network declares offered_assets (set per instance); the stubs' plugin takes to_attr for a second definition.
        .prefetch_related(Prefetch("assets", queryset=assets, to_attr="offered_assets"))  # type: ignore[no-redef]
    )
    offered: list[Network] = []
    for network in networks:
        if not rpc_urls(network):
            continue
        network.offered_assets = [asset for asset in network.offered_assets if _priced(asset, network, now)]
        if network.offered_assets:
            offered.append(network)
    return offered


def network_health_record(*, network: Network, ok: bool, error: str = "", head: int | None = None) -> None:
    """What the last contact with the network's RPC showed; the admin and checkout read it."""
    fields = {"rpc_ok": ok, "rpc_checked_at": timezone.now(), "rpc_error": error[:300]}
    if head is not None:
        fields["head_block"] = head
    flipped = network.rpc_ok != ok
    # Counted in the database, one increment per failure: every worker's failures add up (payments_rpc_errors_total).
    counted = {} if ok else {"rpc_errors": F("rpc_errors") + 1}
    Network.objects.filter(pk=network.pk).update(**fields, **counted)
    for name, value in fields.items():
        setattr(network, name, value)
    if flipped:  # an update() sends no post_save: the cached catalog (shop.catalog) listens to this instead
        network_health_changed.send(sender=Network, network=network)


def _about(seconds: int) -> str:
    if seconds < 120:
        return ngettext("%(count)s second", "%(count)s seconds", seconds) % {"count": seconds}
    minutes = round(seconds / 60)
    return ngettext("%(count)s minute", "%(count)s minutes", minutes) % {"count": minutes}


def finality_description(network: Network) -> str:
    """When a transfer on this network counts, and about how long that takes: shown before and after paying."""
    values = {"network": network.name, "wait": _about(network.finality_wait_seconds)}
    if network.finality == Finality.SAFE:
        return (
            _(
                "On %(network)s a transfer counts once its batch is recorded on the parent chain "
                "(its safe block): about %(wait)s."
            )
            % values
        )
    if network.finality == Finality.FINALIZED:
        return _("On %(network)s a transfer counts once the network has finalized its block: about %(wait)s.") % values
    count = network.confirmations_required
    return ngettext(
        "On %(network)s a transfer counts after %(count)s confirmation: about %(wait)s.",
        "On %(network)s a transfer counts after %(count)s confirmations: about %(wait)s.",
        count,
    ) % {**values, "count": count}
