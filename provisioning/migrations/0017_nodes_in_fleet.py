"""The nodes are the fleet's (fleet/0001): provisioning's relations point there and it lets go of the models.
State only: the tables and their constraints stay as they are."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0001_initial"),
        ("orders", "0015_nodes_in_fleet"),  # its relations to the nodes moved first
        ("provisioning", "0016_staff_labels_translated"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="nodemove",
                    name="from_node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="moves_from", to="fleet.node"
                    ),
                ),
                migrations.AlterField(
                    model_name="nodecheck",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="checks",
                        to="fleet.node",
                        verbose_name="node",
                    ),
                ),
                migrations.AlterField(
                    model_name="nodemove",
                    name="to_node",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="moves_to",
                        to="fleet.node",
                    ),
                ),
                migrations.AlterField(
                    model_name="downtimehold",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="downtime_holds", to="fleet.node"
                    ),
                ),
                migrations.AlterField(
                    model_name="preparationrun",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="preparation_runs",
                        to="fleet.node",
                        verbose_name="node",
                    ),
                ),
                migrations.AlterField(
                    model_name="nodehealth",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="health_probes", to="fleet.node"
                    ),
                ),
                migrations.AlterField(
                    model_name="accessgrant",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="access_grants",
                        to="fleet.node",
                        verbose_name="node",
                    ),
                ),
                migrations.DeleteModel(
                    name="NodeEvent",
                ),
                migrations.DeleteModel(
                    name="Node",
                ),
            ],
        ),
    ]
