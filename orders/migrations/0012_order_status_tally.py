"""/metrics' `shop_orders` reads a tally the database keeps, not a count of every order at each scrape."""

from django.db import migrations

from core.tallies.triggers import tally_kept


class Migration(migrations.Migration):
    dependencies = [("orders", "0011_admin_order_indexes"), ("tallies", "0001_tally")]

    operations = [tally_kept(table="shop_order", name="shop_orders", column="status")]
