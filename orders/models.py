"""The catalog (what a lot is, durations, preparations), orders, their events and reservations."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import get_language, pgettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from core.email_address import email_match_key_or_blank
from core.transition_event import TransitionEvent
from orders.first_payment import FirstPayment


class LocalizedTextMixin:
    """Catalog text that staff write in each language: `<field>_en`, `<field>_es`, `<field>_fr`."""

    def localized(self, field: str, language: str | None = None) -> str:
        language = (language or get_language() or "en")[:2]
        return getattr(self, f"{field}_{language}", "") or getattr(self, f"{field}_en")


class LotSpec(models.Model):
    """What one lot is. One row; staff edit it in the admin."""

    gpu_model = models.CharField(max_length=100, default="NVIDIA B200")
    gpus_per_lot = models.PositiveSmallIntegerField(default=2)
    gpu_memory_gb = models.PositiveIntegerField(default=180, help_text="Memory of each card, not pooled.")
    memory_type = models.CharField(max_length=40, default="HBM3e")

    class Meta:
        db_table = "shop_lotspec"
        verbose_name = pgettext_lazy("staff", "lot specification")
        verbose_name_plural = pgettext_lazy("staff", "lot specifications")

    def __str__(self) -> str:
        return f"{self.gpus_per_lot} x {self.gpu_model}, {self.gpu_memory_gb} GB {self.memory_type} per card"

    @classmethod
    def current(cls) -> LotSpec:
        spec = cls.objects.order_by("pk").first()
        return spec if spec is not None else cls.objects.create()


class Duration(LocalizedTextMixin, models.Model):
    days = models.PositiveSmallIntegerField(unique=True, validators=[MinValueValidator(1)])
    price_per_lot_usd = models.DecimalField(max_digits=12, decimal_places=2, validators=[MinValueValidator(0)])
    purpose_en = models.CharField(max_length=300)
    purpose_es = models.CharField(max_length=300, blank=True)
    purpose_fr = models.CharField(max_length=300, blank=True)
    active = models.BooleanField(default=True)

    class Meta:
        db_table = "shop_duration"
        verbose_name = pgettext_lazy("staff", "duration")
        verbose_name_plural = pgettext_lazy("staff", "durations")
        ordering = ["days"]

    def __str__(self) -> str:
        return f"{self.days} days"

    @property
    def purpose(self) -> str:
        return self.localized("purpose")


class Preparation(LocalizedTextMixin, models.Model):
    """The environment delivered on the node. Later issues attach its setup step and preflight profile."""

    slug = models.SlugField(unique=True)
    name_en = models.CharField(max_length=120)
    name_es = models.CharField(max_length=120, blank=True)
    name_fr = models.CharField(max_length=120, blank=True)
    description_en = models.TextField()
    description_es = models.TextField(blank=True)
    description_fr = models.TextField(blank=True)
    position = models.PositiveSmallIntegerField(default=0)
    active = models.BooleanField(default=True)
    # What the node gets: a setup step (shell, run on the node before the preflight) and the preflight
    # profile that proves it (checks, extensions, shard or not; see provisioning/preflight/profile.py).
    setup_script = models.TextField(blank=True, help_text="Run on the node before the preflight (bash).")
    preflight_profile = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "shop_preparation"
        verbose_name = pgettext_lazy("staff", "preparation")
        verbose_name_plural = pgettext_lazy("staff", "preparations")
        ordering = ["position", "slug"]

    def __str__(self) -> str:
        return self.name_en

    @property
    def name(self) -> str:
        return self.localized("name")

    @property
    def description(self) -> str:
        return self.localized("description")


class OrderStatus(models.TextChoices):
    AWAITING_PAYMENT = "awaiting_payment", _("Awaiting payment")  # placed, quote open
    PAYMENT_REPORTED = "payment_reported", _("Payment reported")  # customer pressed "I have paid"
    PAID = "paid", _("Paid")  # payment confirmed on-chain, waiting for preparation
    NEEDS_REVIEW = "needs_review", _("Needs review")  # a payment exception a reviewer settles
    EXPIRED = "expired", _("Expired")  # the window ended without a payment; lots released
    CANCELLED = "cancelled", _("Cancelled")  # by staff; lots released
    PREPARING = "preparing", _("Preparing")  # the node runs its setup and preflight
    PREPARATION_FAILED = "preparation_failed", _("Preparation failed")  # operators investigate
    ACTIVE = "active", _("Active")  # access handed over, the rental clock runs
    ENDED = "ended", _("Ended")  # access revoked at the end of the rental


class HypothesisKind(models.TextChoices):
    BIGGER_BATCH = "bigger_batch", _("A larger global batch")
    SHORTER_STEP = "shorter_step", _("A shorter step time")
    MAKE_POSSIBLE = "make_possible", _("Making the run possible at all")


class Order(models.Model):
    reference = models.CharField(max_length=16, unique=True, verbose_name=pgettext_lazy("staff", "reference"))
    # The secret access token is an HMAC of this nonce under SECRET_KEY (orders.orders.order_access_token):
    # a database dump alone opens no order page, and emails can still carry the link.
    access_nonce = models.CharField(max_length=32, unique=True, verbose_name=pgettext_lazy("staff", "access nonce"))
    status = models.CharField(
        max_length=24,
        choices=OrderStatus.choices,
        default=OrderStatus.AWAITING_PAYMENT,
        verbose_name=pgettext_lazy("staff", "status"),
    )

    lots = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1)], verbose_name=pgettext_lazy("staff", "lots")
    )
    duration = models.ForeignKey(
        Duration, on_delete=models.PROTECT, related_name="orders", verbose_name=pgettext_lazy("staff", "duration")
    )
    preparation = models.ForeignKey(
        Preparation, on_delete=models.PROTECT, related_name="orders", verbose_name=pgettext_lazy("staff", "preparation")
    )
    # Frozen at placement: later catalog edits don't change what the customer was quoted.
    duration_days = models.PositiveSmallIntegerField(verbose_name=pgettext_lazy("staff", "duration days"))
    gpu_model = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "GPU model"))
    gpus_per_lot = models.PositiveSmallIntegerField(verbose_name=pgettext_lazy("staff", "GPUs per lot"))
    gpu_memory_gb = models.PositiveIntegerField(
        help_text=pgettext_lazy("staff", "Per card."), verbose_name=pgettext_lazy("staff", "GPU memory (GB)")
    )
    price_per_lot_usd = models.DecimalField(
        max_digits=12, decimal_places=2, verbose_name=pgettext_lazy("staff", "price per lot USD")
    )
    total_usd = models.DecimalField(max_digits=14, decimal_places=2, verbose_name=pgettext_lazy("staff", "total USD"))

    first_name = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "first name"))
    last_name = models.CharField(max_length=150, verbose_name=pgettext_lazy("staff", "last name"))
    email = models.EmailField(
        verbose_name=pgettext_lazy("staff", "email")
    )  # normalised (core.email_address): where the emails go
    # "The same address" as "Find my order" and the admin's search compare it (core.email_address.email_match_key),
    # kept by save(); "" for an address the rules refuse (an order from before them, an erased one): never matched.
    email_key = models.CharField(
        max_length=254, db_index=True, editable=False, default="", verbose_name=pgettext_lazy("staff", "email key")
    )
    ssh_public_key = models.TextField(verbose_name=pgettext_lazy("staff", "SSH public key"))
    ssh_key_fingerprint = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "SSH key fingerprint"))
    hypothesis_kind = models.CharField(
        max_length=20,
        choices=HypothesisKind.choices,
        blank=True,
        verbose_name=pgettext_lazy("staff", "hypothesis kind"),
    )
    hypothesis_text = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "hypothesis text"))
    language = models.CharField(
        max_length=8, choices=settings.LANGUAGES, default="en", verbose_name=pgettext_lazy("staff", "language")
    )
    terms_accepted_at = models.DateTimeField(verbose_name=pgettext_lazy("staff", "terms accepted at"))
    # Set once staff erased the contact data on the customer's request (shop.personal_data).
    personal_data_erased_at = models.DateTimeField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "personal data erased at")
    )

    created_at = models.DateTimeField(
        default=timezone.now, db_index=True, verbose_name=pgettext_lazy("staff", "created at")
    )
    updated_at = models.DateTimeField(auto_now=True, verbose_name=pgettext_lazy("staff", "updated at"))
    # The rental clock starts when access works, not at payment.
    active_since = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "active since"))
    ends_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "ends at"))

    class Meta:
        db_table = "shop_order"
        verbose_name = pgettext_lazy("staff", "order")
        verbose_name_plural = pgettext_lazy("staff", "orders")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "created_at"]),
            # the retention pass's rules: orders in a finished status last changed before a cutoff
            models.Index(fields=["status", "updated_at"], name="order_status_changed"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(lots__gte=1), name="order_lots_positive"),
        ]
        permissions = [("manage_personal_data", "Export and erase a customer's personal data")]

    def __str__(self) -> str:
        return self.reference

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The key follows the address whoever writes it (placement, the erasure, the admin's change page); a save
        # of other fields (every status change) leaves both as they are.
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "email" in update_fields:
            self.email_key = email_match_key_or_blank(self.email)
        if update_fields is not None and "email" in update_fields:
            kwargs["update_fields"] = {*update_fields, "email_key"}
        super().save(*args, **kwargs)

    @property
    def total_gpus(self) -> int:
        return self.lots * self.gpus_per_lot

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    # The order's first payment request (extensions have their own: `payments` holds them all). Read once and
    # kept, like the one-to-one accessor it replaced; a query may bring it along (joined by order_for_token, or
    # prefetched into FIRST_PAYMENTS by the admin's export).
    @property
    def payment(self) -> FirstPayment:  # a payments.models.PaymentRequest (payments.checkout.order_first_payment)
        cache = self._state.fields_cache
        if FIRST_PAYMENT not in cache:
            first = getattr(self, FIRST_PAYMENTS, None)  # fetched with Prefetch(to_attr=FIRST_PAYMENTS)
            if first is None and self.__dict__.get(FIRST_PAYMENT_JOINED) is not None:
                first = [self.__dict__[FIRST_PAYMENT_JOINED]]  # joined: FilteredRelation + select_related
            if first is None:
                first = list(self.payments.filter(extension__isnull=True)[:1])
            if not first:
                raise Order.PaymentMissing(f"order {self.pk} has no payment request")
            cache[FIRST_PAYMENT] = first[0]
        payment: FirstPayment = cache[FIRST_PAYMENT]  # put there above or by the setter
        return payment

    @payment.setter
    def payment(self, value: FirstPayment) -> None:
        self._state.fields_cache[FIRST_PAYMENT] = value

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        self._state.fields_cache.pop(FIRST_PAYMENT, None)
        super().refresh_from_db(*args, **kwargs)

    class PaymentMissing(ObjectDoesNotExist, AttributeError):
        """No payment request yet (as the one-to-one accessor's error: `getattr(order, "payment", None)` works)."""


FIRST_PAYMENT = "_first_payment"
FIRST_PAYMENTS = "first_payments"
FIRST_PAYMENT_JOINED = "first_payment"


class OrderEvent(models.Model):
    """One row per change of an order's status (who, when, from, to, why)."""

    order = models.ForeignKey(
        Order, on_delete=models.CASCADE, related_name="events", verbose_name=pgettext_lazy("staff", "order")
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    from_status = models.CharField(
        max_length=24, choices=OrderStatus.choices, blank=True, verbose_name=pgettext_lazy("staff", "from status")
    )
    to_status = models.CharField(
        max_length=24, choices=OrderStatus.choices, verbose_name=pgettext_lazy("staff", "to status")
    )
    actor = models.CharField(
        max_length=150,
        help_text=pgettext_lazy("staff", "customer, system, or the staff user's name"),
        verbose_name=pgettext_lazy("staff", "actor"),
    )
    reason = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "reason"))

    class Meta:
        db_table = "shop_orderevent"
        verbose_name = pgettext_lazy("staff", "order event")
        verbose_name_plural = pgettext_lazy("staff", "order events")
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["-created_at", "-id"], name="order_event_newest")]  # the admin's list

    def __str__(self) -> str:
        return f"{self.order_id}: {self.get_from_status_display() or '-'} -> {self.get_to_status_display()}"


class ReservationQuerySet(models.QuerySet["Reservation"]):
    def live(self) -> ReservationQuerySet:
        """Holds not released yet (an expired one is live until the expiry pass releases it)."""
        return self.filter(released_at__isnull=True)


class Reservation(models.Model):
    """A node (one lot) held for an order; held until `expires_at`, or until released when null."""

    order = models.ForeignKey(
        Order, on_delete=models.CASCADE, related_name="reservations", verbose_name=pgettext_lazy("staff", "order")
    )
    node = models.ForeignKey(
        "fleet.Node",
        on_delete=models.PROTECT,
        related_name="reservations",
        verbose_name=pgettext_lazy("staff", "node"),
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    expires_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "expires at"))
    released_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "released at"))
    release_reason = models.CharField(max_length=200, blank=True, verbose_name=pgettext_lazy("staff", "release reason"))

    objects = ReservationQuerySet.as_manager()

    class Meta:
        db_table = "shop_reservation"
        verbose_name = pgettext_lazy("staff", "reservation")
        verbose_name_plural = pgettext_lazy("staff", "reservations")
        constraints = [
            # The database refuses a second live hold on a node, whatever the application does.
            models.UniqueConstraint(
                fields=["node"], condition=Q(released_at__isnull=True), name="one_live_reservation_per_node"
            ),
        ]

    def __str__(self) -> str:
        return pgettext("staff", "%(node)s for %(order)s") % {"node": self.node_id, "order": self.order_id}


def order_total_usd(*, lots: int, price_per_lot_usd: Decimal) -> Decimal:
    return (price_per_lot_usd * lots).quantize(Decimal("0.01"))


class OutgoingEmail(models.Model):
    """A customer email, stored in the transaction of the change it announces and sent from there.

    The broker may be down when the change commits: the row waits, and beat sends what is still due.
    """

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="emails")
    name = models.CharField(max_length=40, help_text="templates/emails/<name>/")
    params = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "shop_outgoingemail"
        verbose_name = pgettext_lazy("staff", "outgoing email")
        verbose_name_plural = pgettext_lazy("staff", "outgoing emails")
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["sent_at", "created_at"], name="outgoing_email_due")]

    def __str__(self) -> str:
        return f"{self.name} for {self.order_id}"


class ExtensionStatus(models.TextChoices):
    AWAITING_PAYMENT = "awaiting_payment", _("Awaiting payment")  # opened, its quote open
    PAYMENT_REPORTED = "payment_reported", _("Payment reported")  # the customer pressed "I have paid"
    NEEDS_REVIEW = "needs_review", _("Needs review")  # a payment exception, or paid after the rental ended
    APPLIED = "applied", _("Applied")  # paid: the rental's end moved by its days
    EXPIRED = "expired", _("Expired")  # the window ended unpaid, or a reviewer rejected its payment


# An extension still waiting for its money.
EXTENSION_OPEN_STATUSES = (ExtensionStatus.AWAITING_PAYMENT, ExtensionStatus.PAYMENT_REPORTED)


class Extension(models.Model):
    """More days for an active rental, bought with a payment request of its own (its `payment`)."""

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="extensions", verbose_name=pgettext_lazy("staff", "order")
    )
    status = models.CharField(
        max_length=24,
        choices=ExtensionStatus.choices,
        default=ExtensionStatus.AWAITING_PAYMENT,
        verbose_name=pgettext_lazy("staff", "status"),
    )
    # Frozen when opened, from the catalog: later edits don't change what the customer was quoted.
    duration_days = models.PositiveSmallIntegerField(verbose_name=pgettext_lazy("staff", "duration days"))
    price_per_lot_usd = models.DecimalField(
        max_digits=12, decimal_places=2, verbose_name=pgettext_lazy("staff", "price per lot USD")
    )
    lots = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1)], verbose_name=pgettext_lazy("staff", "lots")
    )
    total_usd = models.DecimalField(max_digits=14, decimal_places=2, verbose_name=pgettext_lazy("staff", "total USD"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    applied_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "applied at"))
    # The rental's end before and after this extension moved it (set when applied).
    ends_at_before = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "ends at before"))
    ends_at_after = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "ends at after"))

    class Meta:
        db_table = "shop_extension"
        verbose_name = pgettext_lazy("staff", "extension")
        verbose_name_plural = pgettext_lazy("staff", "extensions")
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.order_id}: +{self.duration_days} days ({self.status})"


class ExtensionEvent(TransitionEvent):
    """One row per change of an extension's status (who, when, from, to, why)."""

    extension = models.ForeignKey(
        Extension, on_delete=models.CASCADE, related_name="events", verbose_name=pgettext_lazy("staff", "extension")
    )
    from_status = models.CharField(
        max_length=24, choices=ExtensionStatus.choices, blank=True, verbose_name=pgettext_lazy("staff", "from status")
    )
    to_status = models.CharField(
        max_length=24, choices=ExtensionStatus.choices, verbose_name=pgettext_lazy("staff", "to status")
    )

    class Meta(TransitionEvent.Meta):
        db_table = "shop_extensionevent"
        verbose_name = pgettext_lazy("staff", "extension event")
        verbose_name_plural = pgettext_lazy("staff", "extension events")

    def __str__(self) -> str:
        return f"{self.extension_id}: {self.get_from_status_display() or '-'} -> {self.get_to_status_display()}"


class CreditKind(models.TextChoices):
    DOWNTIME = "downtime", _("Downtime given back")  # probes found the rented node unreachable or failing
    STAFF = "staff", _("Time adjusted by staff")  # added (or removed, negative) by staff with a reason


class RentalCredit(models.Model):
    """Time added to (or, by staff, removed from) a rental's end, one row per credit: the order's `ends_at` moved
    by `seconds` in the same transaction (orders.rental_credits). Downtime credits are capped per rental by
    DOWNTIME_CREDIT_CAP_HOURS; `asked_seconds` is the downtime measured before the cap."""

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="credits", verbose_name=pgettext_lazy("staff", "order")
    )
    kind = models.CharField(max_length=10, choices=CreditKind.choices, verbose_name=pgettext_lazy("staff", "kind"))
    seconds = models.IntegerField(
        help_text=pgettext_lazy("staff", "Added to the end (negative: removed)."),
        verbose_name=pgettext_lazy("staff", "seconds"),
    )
    asked_seconds = models.IntegerField(
        default=0,
        help_text=pgettext_lazy("staff", "The downtime measured, before the cap."),
        verbose_name=pgettext_lazy("staff", "asked seconds"),
    )
    node = models.ForeignKey(
        "fleet.Node",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="rental_credits",
        verbose_name=pgettext_lazy("staff", "node"),
    )
    down_from = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "down from"))
    down_until = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "down until"))
    reason = models.TextField(verbose_name=pgettext_lazy("staff", "reason"))
    actor = models.CharField(max_length=150, verbose_name=pgettext_lazy("staff", "actor"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    ends_at_before = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "ends at before"))
    ends_at_after = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "ends at after"))

    class Meta:
        db_table = "shop_rentalcredit"
        verbose_name = pgettext_lazy("staff", "rental credit")
        verbose_name_plural = pgettext_lazy("staff", "rental credits")
        ordering = ["created_at", "pk"]
        constraints = [
            # One downtime credit per episode of a node: a probe or task run twice credits it once.
            models.UniqueConstraint(
                fields=["order", "node", "down_from"],
                condition=Q(kind="downtime"),
                name="one_credit_per_downtime_episode",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.order_id}: {self.kind} {self.seconds:+d} s"


class SshKeyChange(models.Model):
    """The customer replaced the order's SSH key (order page or API). Before preparation it only changes the
    order; while active it is installed on the order's nodes (old key removed) and the manifest is signed again:
    `applied_at` is set once every node carries it."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="key_changes")
    old_fingerprint = models.CharField(max_length=100)
    new_fingerprint = models.CharField(max_length=100)
    # The new key's normalised line (orders.sshkeys): what the job installs while the rental is active.
    public_key = models.TextField(blank=True)
    actor = models.CharField(max_length=150, default="customer")
    created_at = models.DateTimeField(default=timezone.now)
    applied_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        db_table = "shop_sshkeychange"
        verbose_name = pgettext_lazy("staff", "SSH key change")
        verbose_name_plural = pgettext_lazy("staff", "SSH key changes")
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.order_id}: key {self.old_fingerprint} -> {self.new_fingerprint}"
