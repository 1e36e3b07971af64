"""The order domain's label is its package's name, "orders" (it was "shop"; core/app_labels.py), and its relations
to the nodes point at the fleet: state and content types only, no table or column changes."""

import django.db.models.deletion
from django.db import migrations, models

from core.app_labels import ORDERS_FIRST_LABEL, content_types_relabelled

ORDER_MODELS = [
    "duration", "extension", "extensionevent", "lotspec", "order", "orderevent", "outgoingemail", "preparation",
    "rentalcredit", "reservation", "sshkeychange",
]  # fmt: skip


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0001_initial"),
        ("orders", "0014_staff_labels_translated"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="rentalcredit",
                    name="node",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="rental_credits",
                        to="fleet.node",
                        verbose_name="node",
                    ),
                ),
                migrations.AlterField(
                    model_name="reservation",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="reservations",
                        to="fleet.node",
                        verbose_name="node",
                    ),
                ),
            ],
        ),
        content_types_relabelled(ORDERS_FIRST_LABEL, "orders", ORDER_MODELS),
    ]
