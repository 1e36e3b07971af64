"""The admin's order list filters by the catalog's durations and by dates relative to today, without reading
every order to offer its choices."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orders.models import Order
from tests.stored_rows import order_stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("olga", "olga@example.org", "a-long-password-1"))
    return client


def test_the_duration_filter_offers_the_catalog_and_keeps_its_orders(staff_client):
    short, week = order_stored(reference="B2-DUR-0003", days=3), order_stored(reference="B2-DUR-0007", days=7)
    Order.objects.filter(pk=short.pk).update(created_at=timezone.now() - dt.timedelta(days=40))

    page = staff_client.get("/admin/orders/order/").content.decode()
    assert "?duration_days=3" in page and "?duration_days=30" in page  # the catalog's, whatever was ordered

    three = staff_client.get("/admin/orders/order/?duration_days=3").content.decode()
    assert short.reference in three and week.reference not in three
    # A value that is not a number filters nothing (never an error page)
    odd = staff_client.get("/admin/orders/order/?duration_days=x")
    assert odd.status_code == 200
    assert short.reference in odd.content.decode() and week.reference in odd.content.decode()

    # Dates relative to today: the last 7 days hold the new order only
    since = (timezone.now() - dt.timedelta(days=7)).date().isoformat()
    recent = staff_client.get(f"/admin/orders/order/?created_at__gte={since}").content.decode()
    assert week.reference in recent and short.reference not in recent


def test_the_filters_read_no_order_to_offer_their_choices(staff_client):
    order_stored(reference="B2-DUR-0001")
    staff_client.get("/admin/orders/order/")  # sessions and content types cached

    with CaptureQueriesContext(connection) as queries:
        staff_client.get("/admin/orders/order/")

    distinct = [q["sql"] for q in queries if "DISTINCT" in q["sql"].upper() and "shop_order" in q["sql"]]
    assert distinct == []
