from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import pgettext_lazy


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    verbose_name = pgettext_lazy("staff", "Provisioning")

    def ready(self) -> None:
        from orders.extensions import extension_applied
        from orders.rental_credits import rental_end_moved
        from provisioning import emails  # noqa: F401  registers its emails with the outbox
        from provisioning.access import access_follow_extension
        from provisioning.end_follow import access_follow_end

        extension_applied.connect(access_follow_extension, dispatch_uid="access_follow_extension")
        rental_end_moved.connect(access_follow_end, dispatch_uid="access_follow_end")
