"""The nodes become the fleet's models (their tables keep provisioning's names): state only, no table moves.

provisioning/0017 lets go of them, once the order domain's and provisioning's relations point here."""

import django.db.models.deletion
import django.utils.timezone
import fleet.models
from django.db import migrations, models

from core.app_labels import content_types_relabelled


class Migration(migrations.Migration):

    initial = True

    dependencies = [("provisioning", "0016_staff_labels_translated"), ("contenttypes", "0002_remove_content_type_name")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
            migrations.CreateModel(
                name='Node',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100, unique=True, verbose_name='name')),
                    ('driver', models.CharField(choices=[('local', 'local (runs on this machine, development)'), ('ssh', 'ssh')], default='ssh', max_length=10, verbose_name='driver')),
                    ('host', models.CharField(blank=True, max_length=255, verbose_name='host')),
                    ('port', models.PositiveIntegerField(default=22, verbose_name='port')),
                    ('user', models.CharField(blank=True, max_length=64, verbose_name='user')),
                    ('host_key', models.TextField(blank=True, help_text="The node's SSH host public key, pinned.", verbose_name='host key')),
                    ('gpu_model', models.CharField(default='NVIDIA B200', max_length=100, verbose_name='GPU model')),
                    ('gpu_count', models.PositiveSmallIntegerField(default=2, verbose_name='GPU count')),
                    ('python', models.CharField(default='python3', help_text='The Python that runs the preflight.', max_length=255, verbose_name='python')),
                    ('preflight_device', models.CharField(choices=[('cuda', 'cuda'), ('cpu', 'cpu (development)')], default='cuda', max_length=8, verbose_name='preflight device')),
                    ('thresholds', models.JSONField(blank=True, default=dict, help_text='Preflight thresholds for this node (empty: the figures for its cards, see docs/provisioning.md).', verbose_name='thresholds')),
                    ('accounts_root', models.CharField(blank=True, help_text='Empty: customer accounts are real accounts on the node. A directory: a sandboxed user database.', max_length=255, verbose_name='accounts root')),
                    ('access_tool', models.CharField(blank=True, help_text="Empty: the login is root and runs the access tool copied with each preparation. A path (e.g. /usr/local/sbin/b200-access): the login is not root; this shop's access tool, installed there by root, runs with `sudo -n` under the sudo rule of docs/production.md.", max_length=255, verbose_name='access tool')),
                    ('scratch_paths', models.TextField(blank=True, help_text="The node's scratch folders, one absolute path a line (e.g. /scratch): swept for the tenant's files at the end of each rental, besides /tmp, /var/tmp, /dev/shm and the node's other local filesystems. Its own disks only: a folder shared with other machines is refused.", validators=[fleet.models.validate_scratch_paths], verbose_name='scratch paths')),
                    ('state', models.CharField(choices=[('available', 'available'), ('allocated', 'allocated'), ('preparing', 'preparing'), ('in_use', 'in use'), ('maintenance', 'maintenance'), ('failed', 'failed'), ('revoking', 'revoking access'), ('degraded', 'degraded (rented, failing its health probe)')], default='available', max_length=16, verbose_name='state')),
                    ('state_reason', models.CharField(blank=True, max_length=300, verbose_name='state reason')),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                ],
                options={
                    'verbose_name': 'node',
                    'verbose_name_plural': 'nodes',
                    'db_table': 'provisioning_node',
                    'ordering': ['name'],
                },
            ),
            migrations.CreateModel(
                name='NodeEvent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                    ('actor', models.CharField(help_text="system, or the staff user's name", max_length=150, verbose_name='actor')),
                    ('reason', models.TextField(blank=True, verbose_name='reason')),
                    ('from_state', models.CharField(choices=[('available', 'available'), ('allocated', 'allocated'), ('preparing', 'preparing'), ('in_use', 'in use'), ('maintenance', 'maintenance'), ('failed', 'failed'), ('revoking', 'revoking access'), ('degraded', 'degraded (rented, failing its health probe)')], max_length=16, verbose_name='from state')),
                    ('to_state', models.CharField(choices=[('available', 'available'), ('allocated', 'allocated'), ('preparing', 'preparing'), ('in_use', 'in use'), ('maintenance', 'maintenance'), ('failed', 'failed'), ('revoking', 'revoking access'), ('degraded', 'degraded (rented, failing its health probe)')], max_length=16, verbose_name='to state')),
                    ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='fleet.node', verbose_name='node')),
                ],
                options={
                    'verbose_name': 'node event',
                    'verbose_name_plural': 'node events',
                    'db_table': 'provisioning_nodeevent',
                    'ordering': ['created_at', 'pk'],
                    'abstract': False,
                },
            ),
            ],
        ),
        content_types_relabelled("provisioning", "fleet", ["node", "nodeevent"]),
    ]
