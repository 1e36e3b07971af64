from __future__ import annotations

from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    verbose_name = "Provisioning"

    def ready(self) -> None:
        from provisioning import emails  # noqa: F401  registers its emails with the outbox
