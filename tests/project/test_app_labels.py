"""App labels equal package names, and the change from the old labels moved no data (docs/architecture.md, "App
labels"): the tables keep their names, the state-only migrations write no SQL, a database migrated under the old
labels comes through `migrate` with its rows, its permissions and their holders, and old admin links redirect."""

from __future__ import annotations

import io

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from core.app_labels import recorded_migrations_relabelled
from core.roles import ROLES, role_group
from tests.stored_rows import a_node, an_order

PACKAGES = ["config", "core.jobs", "core.tallies", "fleet", "orders", "shop", "payments", "provisioning"]
STATE_ONLY = [("fleet", "0001_initial"), ("orders", "0015_nodes_in_fleet"), ("provisioning", "0017_nodes_in_fleet")]
# The tables as they were named under the old labels: the order domain's under "shop", the nodes' under
# "provisioning". A rename here would be an ALTER TABLE on every database in service.
OLD_PREFIX = {"orders": "shop_", "fleet": "provisioning_"}


def test_each_app_label_is_its_package_name_but_the_core_apps_short_ones():
    labels = {apps.get_app_config(label).name: label for label in [c.label for c in apps.get_app_configs()]}
    assert {package: labels[package] for package in PACKAGES} == {
        "config": "config",
        "core.jobs": "jobs",
        "core.tallies": "tallies",
        "fleet": "fleet",
        "orders": "orders",
        "shop": "shop",
        "payments": "payments",
        "provisioning": "provisioning",
    }


@pytest.mark.parametrize("label", sorted(OLD_PREFIX))
def test_the_moved_apps_tables_keep_the_names_they_had(label):
    models = list(apps.get_app_config(label).get_models())
    assert models
    assert [m._meta.db_table for m in models] == [OLD_PREFIX[label] + m._meta.model_name for m in models]


@pytest.mark.parametrize(("app", "name"), STATE_ONLY)
def test_the_relabelling_migrations_change_no_table(db, app, name):
    out = io.StringIO()
    call_command("sqlmigrate", app, name, stdout=out)
    statements = [line for line in out.getvalue().splitlines() if line and not line.startswith("--")]
    assert statements == ["BEGIN;", "COMMIT;"], out.getvalue()


def as_before_the_relabelling() -> None:
    """The database as the code of before left it: the order domain's migrations recorded under "shop", the
    content types under the old labels, the three relabelling migrations not applied."""
    with connection.cursor() as cursor:
        for app, name in STATE_ONLY:
            cursor.execute("DELETE FROM django_migrations WHERE app = %s AND name = %s", [app, name])
        cursor.execute("UPDATE django_migrations SET app = 'shop' WHERE app = 'orders'")
        cursor.execute("UPDATE django_content_type SET app_label = 'shop' WHERE app_label = 'orders'")
        cursor.execute("UPDATE django_content_type SET app_label = 'provisioning' WHERE app_label = 'fleet'")
    ContentType.objects.clear_cache()


@pytest.fixture
def clean_content_type_cache():
    yield
    ContentType.objects.clear_cache()  # the test's rows roll back; the cache would keep their ids


def test_a_database_of_before_keeps_its_rows_and_every_permission_held(db, clean_content_type_cache):
    operators = role_group("operator")
    person = User.objects.create_user("ana", is_staff=True)
    person.groups.add(operators)
    person.user_permissions.add(Permission.objects.get(content_type__app_label="orders", codename="view_order"))
    node, order = a_node(name="gpu-kept"), an_order()
    kinds_before = dict(ContentType.objects.values_list("model", "pk"))
    as_before_the_relabelling()

    out = io.StringIO()
    call_command("migrate", stdout=out, verbosity=1)

    assert "Renamed 14 recorded migrations of the order domain from 'shop' to 'orders'." in out.getvalue()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_migrations WHERE app = 'shop'")
        assert cursor.fetchone() == (0,)
    assert dict(ContentType.objects.values_list("model", "pk")) == kinds_before  # same rows, no new ones
    assert set(ContentType.objects.filter(app_label__in=["shop", "storefront"])) == set()
    person = User.objects.get(pk=person.pk)  # a fresh permission cache
    assert person.has_perms(["orders.view_order", "orders.add_rentalcredit", "fleet.change_node"])
    assert not person.has_perm("shop.view_order")
    assert set(operators.permissions.values_list("content_type__app_label", flat=True)) == {
        "fleet",
        "orders",
        "provisioning",
    }
    for role in ROLES:
        role_group(role)  # the roles' permission names all exist
    assert (node.__class__.objects.get(pk=node.pk).name, order.__class__.objects.get(pk=order.pk).reference) == (
        "gpu-kept",
        order.reference,
    )


def test_migrate_renames_the_recorded_migrations_only_once(db):
    as_before_the_relabelling()
    assert recorded_migrations_relabelled(connection, ["0001_initial"]) == 1
    # "shop" is the storefront's from now on: a row it records is never taken for the order domain's
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO django_migrations (app, name, applied) VALUES ('shop', '0002_x', now())")
    assert recorded_migrations_relabelled(connection, ["0002_x"]) == 0
    ContentType.objects.clear_cache()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/shop/order/7/change/?tab=1", "/admin/orders/order/7/change/?tab=1"),
        ("/admin/shop/order/", "/admin/orders/order/"),
        ("/admin/shop/order/7/time/", "/admin/orders/order/7/time/"),
        ("/admin/provisioning/node/3/change/", "/admin/fleet/node/3/change/"),
        ("/admin/provisioning/nodeevent/", "/admin/fleet/nodeevent/"),
    ],
)
def test_an_admin_link_of_before_leads_to_the_same_page(client, old, new):
    response = client.get(old)
    assert (response.status_code, response["Location"]) == (301, new)


def test_provisionings_own_admin_pages_are_not_redirected(admin_client):
    assert admin_client.get("/admin/provisioning/nodecheck/").status_code == 200
    assert admin_client.get("/admin/provisioning/preparationrun/").status_code == 200


def test_a_group_of_before_is_not_lost_to_a_new_content_type(db, clean_content_type_cache):
    """post_migrate made the new label's rows before the data migration ran (a migrate interrupted, say): the old
    rows, which groups hold, win and the new ones give way."""
    kept = Group.objects.create(name="kept")
    kept.permissions.add(Permission.objects.get(content_type__app_label="fleet", codename="change_node"))
    as_before_the_relabelling()
    ContentType.objects.create(app_label="fleet", model="node")  # a stray row under the new label
    call_command("migrate", stdout=io.StringIO(), verbosity=0)
    assert kept.permissions.get().content_type.app_label == "fleet"
    assert ContentType.objects.filter(model="node").count() == 1


def test_the_migrations_describe_the_models_as_they_are(db):
    """A model changed without its migration (or a label moved without its state) would be a migration made on the
    server at the next deploy, or a table Django believes is elsewhere."""
    call_command("makemigrations", check=True, dry_run=True, stdout=io.StringIO())
