"""Staff roles: each a group with only the permissions its work needs."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

ROLES = {
    "reviewer": (
        "Payment reviewers",
        [
            "shop.view_order",
            "shop.view_orderevent",
            "shop.view_reservation",
            "shop.manage_personal_data",
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
            "shop.view_order",
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
            "shop.view_order",
            "shop.view_orderevent",
            "shop.view_reservation",
            "provisioning.view_node",
            "provisioning.add_node",
            "provisioning.change_node",
            "provisioning.prepare_order",
            "provisioning.view_preparationrun",
            "provisioning.view_accessgrant",
            "provisioning.view_manifest",
            "provisioning.view_nodecheck",
            # Time given back or adjusted on a rental, with a reason (shop/admin_time.py)
            "shop.view_rentalcredit",
            "shop.add_rentalcredit",
        ],
    ),
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
    """The names of the roles whose permissions include `permission` ("app_label.codename"), as their groups
    are named: who can act where a person without it was refused."""
    return [name for name, codenames in ROLES.values() if permission in codenames]


def roles_in_app(app_label: str) -> list[str]:
    """The names of the roles with any permission in the app."""
    return [name for name, codenames in ROLES.values() if any(c.startswith(f"{app_label}.") for c in codenames)]
