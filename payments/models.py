"""Networks and assets (data staff edit), USD rates, and the payment request of each order."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

# Integers in base units (wei, token units) go up to 2**256: a 78-digit decimal with no fraction.
BASE_UNITS = {"max_digits": 78, "decimal_places": 0}

address_validator = RegexValidator(r"^0x[0-9a-fA-F]{40}$", "An EVM address is 0x followed by 40 hex digits.")


class Network(models.Model):
    slug = models.SlugField(unique=True, help_text="CHAIN_RPC_URLS_<SLUG> configures its RPC URLs.")
    name = models.CharField(max_length=100)
    chain_id = models.PositiveBigIntegerField(unique=True)
    confirmations_required = models.PositiveSmallIntegerField(default=12)
    explorer_tx_url = models.CharField(
        max_length=200, blank=True, help_text="With {tx} where the transaction hash goes."
    )
    is_development = models.BooleanField(default=False, help_text="A local chain for development and demos.")
    enabled = models.BooleanField(default=True)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name


class Asset(models.Model):
    network = models.ForeignKey(Network, on_delete=models.PROTECT, related_name="assets")
    symbol = models.CharField(max_length=12)
    name = models.CharField(max_length=60)
    decimals = models.PositiveSmallIntegerField(validators=[MaxValueValidator(36)])
    # Null (not blank) for the native coin, so the "one native coin per network" constraint can see it.
    contract = models.CharField(max_length=42, null=True, blank=True, validators=[address_validator])  # noqa: DJ001
    # Stablecoins are priced 1:1 in USD; anything else needs a fresh Rate.
    usd_stable = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["network__position", "symbol"]
        constraints = [
            models.UniqueConstraint(fields=["network", "symbol"], name="one_symbol_per_network"),
            models.UniqueConstraint(
                fields=["network"], condition=Q(contract__isnull=True), name="one_native_coin_per_network"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.symbol} on {self.network.name}"

    @property
    def is_native(self) -> bool:
        return self.contract is None


class Rate(models.Model):
    """The USD price of one whole unit of an asset at a moment; quotes refuse a stale one."""

    asset = models.ForeignKey(Asset, on_delete=models.CASCADE, related_name="rates")
    usd_per_unit = models.DecimalField(max_digits=24, decimal_places=8, validators=[MinValueValidator(Decimal("0"))])
    as_of = models.DateTimeField(default=timezone.now)
    source = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-as_of"]
        get_latest_by = "as_of"

    def __str__(self) -> str:
        return f"{self.asset}: {self.usd_per_unit} USD at {self.as_of:%Y-%m-%d %H:%M}"


class PaymentStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for the transfer")  # nothing seen yet
    DETECTED = "detected", _("Detected, waiting for confirmations")  # seen at latest
    CONFIRMED = "confirmed", _("Confirmed")  # final enough: safe tag or N confirmations
    UNDERPAID = "underpaid", _("Underpaid")  # less than the quote arrived; top-up completes it
    OVERPAID = "overpaid", _("Overpaid")  # more arrived; the excess awaits a refund decision
    LATE = "late", _("Paid after the deadline")  # arrived after the window; a reviewer decides
    WRONG_NETWORK = "wrong_network", _("Sent on another network")  # same address, other chain
    REJECTED = "rejected", _("Rejected")  # a reviewer refused it


class AddressCursor(models.Model):
    """The next derivation index for one account key; taken under a row lock, never reused."""

    key_fingerprint = models.CharField(max_length=64, unique=True)
    next_index = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.key_fingerprint[:12]}: next {self.next_index}"


class PaymentRequest(models.Model):
    order = models.OneToOneField("shop.Order", on_delete=models.PROTECT, related_name="payment")
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="payment_requests")
    # Frozen copies: the request stays what the customer was shown even if staff edit the asset.
    chain_id = models.PositiveBigIntegerField()
    contract = models.CharField(max_length=42, null=True, blank=True)  # noqa: DJ001 - null = native coin
    decimals = models.PositiveSmallIntegerField()

    key_fingerprint = models.CharField(max_length=64)
    derivation_index = models.PositiveBigIntegerField()
    address = models.CharField(max_length=42, unique=True, validators=[address_validator])

    amount_usd = models.DecimalField(max_digits=14, decimal_places=2)
    usd_rate = models.DecimalField(max_digits=24, decimal_places=8)
    rate_as_of = models.DateTimeField(null=True, blank=True)
    amount_base_units = models.DecimalField(**BASE_UNITS)
    expires_at = models.DateTimeField()
    start_block = models.PositiveBigIntegerField(help_text="Only transfers from this block on count.")

    status = models.CharField(max_length=16, choices=PaymentStatus.choices, default=PaymentStatus.PENDING)
    received_base_units = models.DecimalField(**BASE_UNITS, default=0)
    confirmations = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["key_fingerprint", "derivation_index"], name="one_address_per_index"),
            models.CheckConstraint(condition=Q(amount_base_units__gt=0), name="payment_amount_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.order_id}: {self.amount} {self.asset.symbol} to {self.address}"

    @property
    def amount(self) -> Decimal:
        """The amount in whole units, exact."""
        return self.amount_base_units.scaleb(-self.decimals).normalize()
