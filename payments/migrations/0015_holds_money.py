from collections import defaultdict

from django.db import migrations, models


def books_say_money_is_on_it(apps, schema_editor):
    """The same books as payments.books, on the historical models: what arrived (gas top-ups aside) less the
    refunds sent or confirmed, the sweeps not removed and the unexpected outflows."""
    PaymentRequest = apps.get_model("payments", "PaymentRequest")
    holding = []
    for payment in PaymentRequest.objects.filter(credits__isnull=False).distinct().prefetch_related(
        "credits", "refunds", "sweeps", "unexpected_outflows"
    ):
        left = defaultdict(int)
        for credit in payment.credits.all():
            if credit.removed_at is None and credit.kind != "gas":
                left[credit.token_contract.lower()] += int(credit.amount_base_units)
        gone = [r for r in payment.refunds.all() if r.status in ("sent", "confirmed")]
        gone += [s for s in payment.sweeps.all() if s.removed_at is None] + list(payment.unexpected_outflows.all())
        for row in gone:
            left[row.token_contract.lower()] -= int(row.amount_base_units)
        if any(amount > 0 for amount in left.values()):
            holding.append(payment.pk)
    PaymentRequest.objects.filter(pk__in=holding).update(holds_money=True)


class Migration(migrations.Migration):

    dependencies = [
        ('payments', '0014_plan_watch_until'),
    ]

    operations = [
        migrations.AddField(
            model_name='paymentrequest',
            name='holds_money',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(books_say_money_is_on_it, migrations.RunPython.noop),
    ]
