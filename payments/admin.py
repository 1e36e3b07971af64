from __future__ import annotations

from django.contrib import admin

from payments.models import Asset, Network, Rate
from payments.networks import rpc_env_name, rpc_urls


class AssetInline(admin.TabularInline):
    model = Asset
    extra = 0
    fields = ["symbol", "name", "decimals", "contract", "usd_stable", "enabled"]


@admin.register(Network)
class NetworkAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "chain_id", "confirmations_required", "enabled", "rpc_configured"]
    list_editable = ["enabled"]
    inlines = [AssetInline]

    @admin.display(description="RPC configured")
    def rpc_configured(self, network: Network) -> str:
        return "yes" if rpc_urls(network) else f"no (set {rpc_env_name(network.slug)})"


@admin.register(Rate)
class RateAdmin(admin.ModelAdmin):
    list_display = ["asset", "usd_per_unit", "as_of", "source"]
    list_filter = ["asset"]
