"""/metrics' `provisioning_preparations_total` reads a counter the database keeps, not a count of every run."""

from django.db import migrations

from core.tallies.triggers import tally_kept


class Migration(migrations.Migration):
    dependencies = [("provisioning", "0012_history_indexes"), ("tallies", "0001_tally")]

    operations = [
        tally_kept(
            table="provisioning_preparationrun",
            name="provisioning_preparations",
            column="status",
            counts=("passed", "failed", "error", "refused"),
        ),
    ]
