"""/metrics' `payments_unexpected_outflows_total` reads a counter the database keeps: it never goes down, even
once the accounting period's retention removes old rows."""

from django.db import migrations

from core.tallies.triggers import tally_kept


class Migration(migrations.Migration):
    dependencies = [("payments", "0019_admin_order_indexes"), ("tallies", "0001_tally")]

    operations = [tally_kept(table="payments_unexpectedoutflow", name="payments_unexpected_outflows")]
