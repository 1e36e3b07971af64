from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class PaymentsConfig(AppConfig):
    name = "payments"
    verbose_name = pgettext_lazy("staff", "Payments")

    def ready(self) -> None:
        from payments import emails  # noqa: F401  registers its emails with the outbox
