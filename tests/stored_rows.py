"""Rows stored directly, for tests about a model's own rules (no wizard, no chain, no quote)."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from core.jobs.models import Job
from orders.models import Duration, Order, Preparation


def order_stored(*, reference: str = "B2-TEST-0001", days: int = 7) -> Order:
    """An order for one lot of the catalog's B200 pair, as the wizard would have stored it."""
    duration = Duration.objects.get(days=days)
    return Order.objects.create(
        reference=reference,
        access_nonce=reference.encode().hex()[:32].ljust(32, "0"),  # one per reference: nonces are unique
        lots=1,
        duration=duration,
        preparation=Preparation.objects.get(slug="pytorch-blackwell"),
        duration_days=duration.days,
        gpu_model="NVIDIA B200",
        gpus_per_lot=2,
        gpu_memory_gb=180,
        price_per_lot_usd=duration.price_per_lot_usd,
        total_usd=duration.price_per_lot_usd,
        first_name="Ada",
        last_name="Lovelace",
        email="ada@example.org",
        ssh_public_key="ssh-ed25519 AAAA test",
        ssh_key_fingerprint="SHA256:test",
        terms_accepted_at=timezone.now(),
    )


def jobs_lost(*, seconds_ago: float = 600, **filters) -> int:
    """Open jobs whose send never reached a worker (the broker was down at commit), made `seconds_ago`: beat's
    sweep sends them again. Returns how many."""
    since = timezone.now() - dt.timedelta(seconds=seconds_ago)
    return Job.objects.open().filter(**filters).update(created_at=since, due_at=since, claimed_until=None)
