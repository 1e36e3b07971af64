"""Reads of the catalog, shared by the pages and the API."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from payments.models import Network
from payments.networks import networks_offered
from shop.capacity import lots_available
from shop.models import Duration, LotSpec, Preparation


@dataclass(frozen=True)
class Catalog:
    lot: LotSpec
    durations: list[Duration]
    preparations: list[Preparation]
    networks: list[Network]  # each with `offered_assets`
    lots_available: int


def catalog_current() -> Catalog:
    return Catalog(
        lot=LotSpec.current(),
        durations=list(Duration.objects.filter(active=True)),
        preparations=list(Preparation.objects.filter(active=True)),
        networks=networks_offered(),
        lots_available=lots_available(timezone.now()),
    )
