"""Stored jobs named their task by module path; they now name a registered kind (core/jobs/kinds.py)."""

from django.db import migrations

# The Celery names the kinds had before they were registered names (module paths): stored jobs are renamed.
FORMER_NAMES = {
    "shop.tasks.email_send_task": "orders.email_send",
    "shop.tasks.staff_email_task": "orders.staff_email",
    "shop.tasks.staff_webhook_task": "orders.staff_webhook",
    "shop.tasks.order_lookup_task": "shop.order_lookup",
    "payments.tasks.notice_verify_task": "payments.notice_verify",
    "payments.tasks.outflow_alert_task": "payments.outflow_alert",
    "provisioning.tasks.preparation_run_task": "provisioning.preparation_run",
    "provisioning.tasks.access_withdraw_task": "provisioning.access_withdraw",
    "provisioning.tasks.access_extend_task": "provisioning.access_extend",
    "provisioning.tasks.node_check_task": "provisioning.node_check",
}


def kinds_by_name(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for former, kind in FORMER_NAMES.items():
        Job.objects.filter(kind=former).update(kind=kind)


def kinds_by_path(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for former, kind in FORMER_NAMES.items():
        Job.objects.filter(kind=kind).update(kind=former)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_job")]
    operations = [migrations.RunPython(kinds_by_name, kinds_by_path)]
