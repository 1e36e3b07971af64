from django.db import migrations, models

from core.tallies.triggers import tally_functions


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Tally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("label", models.CharField(blank=True, max_length=100)),
                ("n", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("name", "label"), name="one_tally_per_label")],
            },
        ),
        tally_functions(),
    ]
