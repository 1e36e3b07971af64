"""Staff roles: each a group with only the permissions its work needs."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission
from django.utils.translation import pgettext_lazy

ROLES = {
    "reviewer": (
        "Payment reviewers",
        [
            "orders.view_order",
            "orders.view_orderevent",
            "orders.view_reservation",
            "orders.manage_personal_data",
            "payments.view_paymentrequest",
            "payments.review_payment",
            "payments.view_credit",
            "payments.view_notice",
            "payments.view_paymentevent",
            "payments.view_network",
            "payments.view_asset",
            "payments.view_refund",
            "payments.view_refundevent",
            "payments.view_ledger",
        ],
    ),
    "treasurer": (
        "Treasurers",
        [
            "orders.view_order",
            "payments.view_paymentrequest",
            "payments.view_credit",
            "payments.view_network",
            "payments.view_asset",
            "payments.view_refund",
            "payments.view_refundevent",
            "payments.plan_treasury",
            "payments.view_ledger",
        ],
    ),
    "operator": (
        "Operators",
        [
            "orders.view_order",
            "orders.view_orderevent",
            "orders.view_reservation",
            "fleet.view_node",
            "fleet.add_node",
            "fleet.change_node",
            "provisioning.prepare_order",
            "provisioning.view_preparationrun",
            "provisioning.view_accessgrant",
            "provisioning.view_manifest",
            "provisioning.view_nodecheck",
            # Time given back or adjusted on a rental, with a reason (shop/admin_time.py)
            "orders.view_rentalcredit",
            "orders.add_rentalcredit",
        ],
    ),
}


# Each role's name as staff read it, in their language; its group keeps the English name of ROLES (the row's key).
ROLE_TITLES = {
    "reviewer": pgettext_lazy("staff", "Payment reviewers"),
    "treasurer": pgettext_lazy("staff", "Treasurers"),
    "operator": pgettext_lazy("staff", "Operators"),
}


def role_group(role: str) -> Group:
    """The role's group, with exactly the role's permissions (created or corrected)."""
    name, codenames = ROLES[role]
    group, _created = Group.objects.get_or_create(name=name)
    permissions = []
    for dotted in codenames:
        app_label, codename = dotted.split(".")
        permissions.append(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    group.permissions.set(permissions)
    return group


def roles_with(permission: str) -> list[str]:
    """The names of the roles whose permissions include `permission` ("app_label.codename"), in the reader's
    language (ROLE_TITLES): who can act where a person without it was refused."""
    return [str(ROLE_TITLES[role]) for role, (_name, codenames) in ROLES.items() if permission in codenames]


def roles_in_app(app_label: str) -> list[str]:
    """The names of the roles with any permission in the app, in the reader's language."""
    in_app = (role for role, (_name, codes) in ROLES.items() if any(c.startswith(f"{app_label}.") for c in codes))
    return [str(ROLE_TITLES[role]) for role in in_app]
