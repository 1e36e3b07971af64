from __future__ import annotations

from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    name = "payments"
    verbose_name = "Payments"

    def ready(self) -> None:
        from payments import emails  # noqa: F401  registers its emails with the outbox
