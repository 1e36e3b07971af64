"""Networks and assets (data staff edit), USD rates, and the payment request of each order."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Self, TypeVar

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext, pgettext_lazy

from core.amounts import units_text
from core.transition_event import TransitionEvent
from payments.fields import BaseUnitsField, format_units

address_validator = RegexValidator(r"^0x[0-9a-fA-F]{40}$", "An EVM address is 0x followed by 40 hex digits.")


class Finality(models.TextChoices):
    """When a block counts as final on a network: one rule per chain, chosen for how the chain finalizes."""

    BLOCKS = "blocks", _("after N confirmations (blocks:N)")  # chains without a finality tag worth more
    SAFE = "safe", _("at the safe block")  # an L2 rollup: its batch is on L1
    FINALIZED = "finalized", _("at the finalized block")  # Ethereum's own finality, chains with fast finality


class Network(models.Model):
    # Set on an instance, never stored: its quotable assets, prefetched by payments.networks.networks_offered
    # (to_attr), and the words of its finality a page shows (shop.views).
    offered_assets: list[Asset]
    finality_text: str

    slug = models.SlugField(
        unique=True,
        help_text=pgettext_lazy("staff", "CHAIN_RPC_URLS_<SLUG> configures its RPC URLs."),
        verbose_name=pgettext_lazy("staff", "slug"),
    )
    name = models.CharField(max_length=100, verbose_name=pgettext_lazy("staff", "name"))
    chain_id = models.PositiveBigIntegerField(unique=True, verbose_name=pgettext_lazy("staff", "chain ID"))
    finality = models.CharField(
        max_length=16,
        choices=Finality.choices,
        default=Finality.FINALIZED,
        help_text=pgettext_lazy(
            "staff", "blocks:N counts confirmations_required blocks; safe and finalized wait for the node's tag."
        ),
        verbose_name=pgettext_lazy("staff", "finality"),
    )
    confirmations_required = models.PositiveSmallIntegerField(
        default=12,
        help_text=pgettext_lazy(
            "staff", "N of blocks:N; with every rule, how many recent blocks each pass reads again."
        ),
        verbose_name=pgettext_lazy("staff", "confirmations required"),
    )
    finality_wait_seconds = models.PositiveIntegerField(
        default=900,
        help_text=pgettext_lazy("staff", "About how long a transfer takes to become final: shown to the customer."),
        verbose_name=pgettext_lazy("staff", "finality wait seconds"),
    )
    explorer_tx_url = models.CharField(
        max_length=200,
        blank=True,
        help_text=pgettext_lazy("staff", "With {tx} where the transaction hash goes."),
        verbose_name=pgettext_lazy("staff", "explorer transaction URL"),
    )
    is_development = models.BooleanField(
        default=False,
        help_text=pgettext_lazy("staff", "A local chain for development and demos."),
        verbose_name=pgettext_lazy("staff", "is development"),
    )
    enabled = models.BooleanField(default=True, verbose_name=pgettext_lazy("staff", "enabled"))
    position = models.PositiveSmallIntegerField(default=0, verbose_name=pgettext_lazy("staff", "position"))
    # Verification policy, as data.
    max_head_age_seconds = models.PositiveIntegerField(
        default=180,
        help_text=pgettext_lazy(
            "staff", "A head older than this counts as down (0: no check, for a chain idle between txs)."
        ),
        verbose_name=pgettext_lazy("staff", "max head age seconds"),
    )
    max_block_range = models.PositiveIntegerField(
        default=1000,
        help_text=pgettext_lazy("staff", "Blocks per eth_getLogs call."),
        verbose_name=pgettext_lazy("staff", "max block range"),
    )
    # An L2's Chainlink sequencer uptime feed: while the sequencer is down (or just back), the L2's price feeds
    # are not updated however fresh they look, so none of them prices a quote (payments.price_feeds).
    sequencer_uptime_feed = models.CharField(
        max_length=42,
        blank=True,
        default="",
        validators=[address_validator],
        help_text=pgettext_lazy(
            "staff", "L2 only: Chainlink's sequencer uptime feed; empty on an L1 or where there is none."
        ),
        verbose_name=pgettext_lazy("staff", "sequencer uptime feed"),
    )
    # The verifier's health, written by each scan pass; a network known to be down is not offered.
    rpc_ok = models.BooleanField(
        null=True,
        blank=True,
        help_text=pgettext_lazy("staff", "Unknown until the first scan pass."),
        verbose_name=pgettext_lazy("staff", "RPC ok"),
    )
    rpc_checked_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "RPC checked at"))
    rpc_error = models.CharField(max_length=300, blank=True, verbose_name=pgettext_lazy("staff", "RPC error"))
    head_block = models.PositiveBigIntegerField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "head block")
    )
    # Failed contacts with the RPC since the network was added: /metrics' payments_rpc_errors_total, counted in
    # the row (not in one process's memory) so that every worker's failures add up and survive a restart.
    rpc_errors = models.PositiveBigIntegerField(
        default=0, editable=False, verbose_name=pgettext_lazy("staff", "RPC errors")
    )
    scan_lag_budget_blocks = models.PositiveIntegerField(
        default=100,
        help_text=pgettext_lazy(
            "staff", "How far the scan may fall behind the head (about five minutes of blocks) before an alert fires."
        ),
        verbose_name=pgettext_lazy("staff", "scan lag budget blocks"),
    )
    # A claim on the network's scan, so that two workers never scan it at once.
    scan_lease_until = models.DateTimeField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "scan lease until")
    )

    class Meta:
        verbose_name = pgettext_lazy("staff", "network")
        verbose_name_plural = pgettext_lazy("staff", "networks")
        ordering = ["position", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def finality_rule(self) -> str:
        """`blocks:12`, `safe` or `finalized`, as operators write it."""
        return f"blocks:{self.confirmations_required}" if self.finality == Finality.BLOCKS else self.finality

    @property
    def finality_tag(self) -> str | None:
        """The block tag whose block, and every block below it, is final; None under blocks:N."""
        return None if self.finality == Finality.BLOCKS else self.finality


class Asset(models.Model):
    network = models.ForeignKey(
        Network, on_delete=models.PROTECT, related_name="assets", verbose_name=pgettext_lazy("staff", "network")
    )
    symbol = models.CharField(max_length=12, verbose_name=pgettext_lazy("staff", "symbol"))
    name = models.CharField(max_length=60, verbose_name=pgettext_lazy("staff", "name"))
    decimals = models.PositiveSmallIntegerField(
        validators=[MaxValueValidator(36)], verbose_name=pgettext_lazy("staff", "decimals")
    )
    # Null (not blank) for the native coin, so the "one native coin per network" constraint can see it.
    contract = models.CharField(  # noqa: DJ001
        max_length=42,
        null=True,
        blank=True,
        validators=[address_validator],
        verbose_name=pgettext_lazy("staff", "contract"),
    )
    # Stablecoins are priced 1:1 in USD; anything else needs a fresh Rate.
    usd_stable = models.BooleanField(default=False, verbose_name=pgettext_lazy("staff", "USD stable"))
    enabled = models.BooleanField(default=True, verbose_name=pgettext_lazy("staff", "enabled"))
    # A Chainlink-style USD aggregator on the asset's own network, read at quote time (payments.price_feeds).
    price_feed = models.CharField(  # noqa: DJ001 - null = no feed: staff rates only
        max_length=42,
        null=True,
        blank=True,
        validators=[address_validator],
        help_text=pgettext_lazy(
            "staff", "USD price feed (AggregatorV3Interface) on this network; empty: staff-entered rates only."
        ),
        verbose_name=pgettext_lazy("staff", "price feed"),
    )
    price_feed_heartbeat_seconds = models.PositiveIntegerField(
        default=3600,
        help_text=pgettext_lazy("staff", "The feed's heartbeat: an answer older than this is refused."),
        verbose_name=pgettext_lazy("staff", "price feed heartbeat seconds"),
    )

    # Set on an instance, never stored: whether only its price feed can quote it, annotated by
    # payments.networks.priceable_assets (read through Network.offered_assets, which drops the annotation's type).
    feed_only: bool

    class Meta:
        verbose_name = pgettext_lazy("staff", "asset")
        verbose_name_plural = pgettext_lazy("staff", "assets")
        ordering = ["network__position", "symbol"]
        constraints = [
            models.UniqueConstraint(fields=["network", "symbol"], name="one_symbol_per_network"),
            models.UniqueConstraint(
                fields=["network"], condition=Q(contract__isnull=True), name="one_native_coin_per_network"
            ),
        ]

    def __str__(self) -> str:
        return pgettext("staff", "%(symbol)s on %(network)s") % {"symbol": self.symbol, "network": self.network.name}

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
        verbose_name = pgettext_lazy("staff", "rate")
        verbose_name_plural = pgettext_lazy("staff", "rates")
        ordering = ["-as_of"]
        get_latest_by = "as_of"

    def __str__(self) -> str:
        at = f"{self.as_of:%Y-%m-%d %H:%M}"
        return pgettext("staff", "%(asset)s: %(usd)s USD at %(at)s") % {
            "asset": self.asset,
            "usd": self.usd_per_unit,
            "at": at,
        }


class PaymentStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for the transfer")  # nothing seen yet
    DETECTED = "detected", _("Detected, waiting for confirmations")  # seen at latest
    CONFIRMED = "confirmed", _("Confirmed")  # final by its network's rule: blocks:N, safe or finalized
    UNDERPAID = "underpaid", _("Underpaid")  # less than the quote arrived; top-up completes it
    OVERPAID = "overpaid", _("Overpaid")  # more arrived; the excess awaits a refund decision
    LATE = "late", _("Paid after the deadline")  # arrived after the window; a reviewer decides
    WRONG_NETWORK = "wrong_network", _("Sent on another network or token")  # same address, other chain/token
    REJECTED = "rejected", _("Rejected")  # a reviewer refused it


class AddressCursor(models.Model):
    """The next derivation index for one account key; taken under a row lock, never reused."""

    key_fingerprint = models.CharField(max_length=64, unique=True)
    next_index = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = pgettext_lazy("staff", "address cursor")
        verbose_name_plural = pgettext_lazy("staff", "address cursors")

    def __str__(self) -> str:
        return f"{self.key_fingerprint[:12]}: next {self.next_index}"


class PaymentRequestQuerySet(models.QuerySet["PaymentRequest"]):
    def watched(self, now: dt.datetime) -> PaymentRequestQuerySet:
        """The deposit addresses the scan reads: in their watch window (a rejected payment's money is decided),
        or, whatever the window and the status: while the books say money is on it (`holds_money`: paid and not
        yet swept or refunded, so a leaked key is still seen), while a refund from it is approved or sent (money
        leaves or waits for confirmations), or while the treasury plan named it (`plan_watch_until`: its sweep
        is on the way). The cost stays bounded by the open orders, the money not yet collected, the open
        refunds and the last plan's items."""
        # One indexed read per reason, joined by UNION ALL: an OR of them (with the refunds' EXISTS) made
        # PostgreSQL read every payment ever made at each pass (154 ms at 100,000 orders, bench/history.py).
        payments = PaymentRequest.objects
        in_window = payments.filter(watch_until__gte=now).exclude(status=PaymentStatus.REJECTED).values("pk")
        holding = payments.filter(holds_money=True).values("pk")
        planned = payments.filter(plan_watch_until__gte=now).values("pk")
        leaving = Refund.objects.filter(status__in=(RefundStatus.APPROVED, RefundStatus.SENT)).values("payment_id")
        return self.filter(pk__in=in_window.union(holding, planned, leaving, all=True))


class PaymentRequest(models.Model):
    # An order has several: its first payment (`order.payment`, extension null) and one per extension.
    order = models.ForeignKey(
        "orders.Order", on_delete=models.PROTECT, related_name="payments", verbose_name=pgettext_lazy("staff", "order")
    )
    extension = models.OneToOneField(
        "orders.Extension",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="payment",
        verbose_name=pgettext_lazy("staff", "extension"),
    )
    asset = models.ForeignKey(
        Asset, on_delete=models.PROTECT, related_name="payment_requests", verbose_name=pgettext_lazy("staff", "asset")
    )
    # Frozen copies: the request stays what the customer was shown even if staff edit the asset.
    chain_id = models.PositiveBigIntegerField(verbose_name=pgettext_lazy("staff", "chain ID"))
    contract = models.CharField(  # noqa: DJ001 - null = native coin
        max_length=42, null=True, blank=True, verbose_name=pgettext_lazy("staff", "contract")
    )
    decimals = models.PositiveSmallIntegerField(verbose_name=pgettext_lazy("staff", "decimals"))

    key_fingerprint = models.CharField(max_length=64, verbose_name=pgettext_lazy("staff", "key fingerprint"))
    derivation_index = models.PositiveBigIntegerField(verbose_name=pgettext_lazy("staff", "derivation index"))
    address = models.CharField(
        max_length=42, unique=True, validators=[address_validator], verbose_name=pgettext_lazy("staff", "address")
    )

    amount_usd = models.DecimalField(max_digits=14, decimal_places=2, verbose_name=pgettext_lazy("staff", "amount USD"))
    usd_rate = models.DecimalField(max_digits=24, decimal_places=8, verbose_name=pgettext_lazy("staff", "USD rate"))
    rate_as_of = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "rate as of"))
    amount_base_units = BaseUnitsField(verbose_name=pgettext_lazy("staff", "amount base units"))
    expires_at = models.DateTimeField(verbose_name=pgettext_lazy("staff", "expires at"))
    start_block = models.PositiveBigIntegerField(
        help_text=pgettext_lazy("staff", "Only transfers from this block on count."),
        verbose_name=pgettext_lazy("staff", "start block"),
    )
    # Coin already on the address before start_block is not the customer's: read once, when a balance
    # shows more than the credits explain (payments/native.py).
    opening_balance_base_units = BaseUnitsField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "opening balance base units")
    )

    # The address stays watched long after the quote's window: late money reaches a reviewer.
    watch_until = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "watch until"))
    # Set by each treasury plan that names the address (payments/treasury.py): the scan reads it until then,
    # whatever its window or status, so the signer's sweep of it is recorded.
    plan_watch_until = models.DateTimeField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "plan watch until")
    )
    # The books say money is on the address (payments.books): kept by every credit and every movement out.
    holds_money = models.BooleanField(default=False, verbose_name=pgettext_lazy("staff", "holds money"))

    status = models.CharField(
        max_length=16,
        choices=PaymentStatus.choices,
        default=PaymentStatus.PENDING,
        verbose_name=pgettext_lazy("staff", "status"),
    )
    received_base_units = BaseUnitsField(default=0, verbose_name=pgettext_lazy("staff", "received base units"))
    confirmations = models.PositiveIntegerField(default=0, verbose_name=pgettext_lazy("staff", "confirmations"))
    # What must be sent back, per asset it arrived in (payments/refunds_due.py): a list of
    # {"network", "chain_id", "asset", "contract", "decimals", "base_units"}; never one sum across assets.
    refunds_due = models.JSONField(default=list, blank=True, verbose_name=pgettext_lazy("staff", "refunds due"))
    refund_decided_at = models.DateTimeField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "refund decided at")
    )
    # When the payment became confirmed (or a reviewer accepted it): money that arrives later never
    # changes its status or its order's (anyone can send dust to a public address); cleared by a reorg
    # that takes the settling money away.
    settled_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "settled at"))
    # Set when a reviewer accepts or rejects: automatic settlement then only refreshes the figures.
    reviewed_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "reviewed at"))
    reviewed_by = models.CharField(max_length=150, blank=True, verbose_name=pgettext_lazy("staff", "reviewed by"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))

    objects = PaymentRequestQuerySet.as_manager()

    class Meta:
        verbose_name = pgettext_lazy("staff", "payment request")
        verbose_name_plural = pgettext_lazy("staff", "payment requests")
        ordering = ["-created_at"]
        permissions = [
            ("review_payment", "Can settle payment exceptions (accept, reject, refund)"),
            ("plan_treasury", "Can see the treasury plan (what the signer pays back and sweeps)"),
            ("view_ledger", "Can download the ledger of on-chain movements"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["key_fingerprint", "derivation_index"], name="one_address_per_index"),
            # One first payment per order; the others each belong to an extension.
            models.UniqueConstraint(
                fields=["order"], condition=Q(extension__isnull=True), name="one_first_payment_per_order"
            ),
            models.CheckConstraint(condition=Q(amount_base_units__gt=0), name="payment_amount_positive"),
        ]
        # What `watched()` and the periodic passes select, read without walking the whole history (issue 30):
        # the few payments in their window, holding money or named by the plan, out of every payment ever made.
        indexes = [
            models.Index(fields=["watch_until"], name="payment_watch_until"),
            models.Index(
                fields=["plan_watch_until"], condition=Q(plan_watch_until__isnull=False), name="payment_plan_watch"
            ),
            models.Index(fields=["id"], condition=Q(holds_money=True), name="payment_holds_money"),
            models.Index(fields=["-created_at", "-id"], name="payment_newest"),  # the admin's default order
        ]

    def __str__(self) -> str:
        amount = units_text(self.amount_base_units, self.decimals, self.asset.symbol)
        return f"{self.order_id}: {amount} to {self.address}"

    def whole_units(self, base_units: int | Decimal) -> Decimal:
        """Base units in whole units of the asset, exact, written without an exponent."""
        return Decimal(format_units(base_units, self.decimals))

    @property
    def amount(self) -> Decimal:
        return self.whole_units(self.amount_base_units)

    @property
    def received(self) -> Decimal:
        return self.whole_units(self.received_base_units)

    @property
    def missing(self) -> Decimal:
        return self.whole_units(max(0, int(self.amount_base_units) - int(self.received_base_units)))


class PaymentEvent(models.Model):
    """One row per change of a payment's status or a reviewer's decision (who, when, from, to, why)."""

    payment = models.ForeignKey(
        PaymentRequest, on_delete=models.CASCADE, related_name="events", verbose_name=pgettext_lazy("staff", "payment")
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    from_status = models.CharField(
        max_length=16, choices=PaymentStatus.choices, blank=True, verbose_name=pgettext_lazy("staff", "from status")
    )
    to_status = models.CharField(
        max_length=16, choices=PaymentStatus.choices, verbose_name=pgettext_lazy("staff", "to status")
    )
    actor = models.CharField(max_length=150, verbose_name=pgettext_lazy("staff", "actor"))
    reason = models.TextField(blank=True, verbose_name=pgettext_lazy("staff", "reason"))

    class Meta:
        verbose_name = pgettext_lazy("staff", "payment event")
        verbose_name_plural = pgettext_lazy("staff", "payment events")
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["-created_at", "-id"], name="payment_event_newest")]  # the admin's list

    def __str__(self) -> str:
        return f"{self.payment_id}: {self.get_from_status_display() or '-'} -> {self.get_to_status_display()}"


class Notice(models.Model):
    """The customer's "I have paid": a request to look now, never proof of payment."""

    payment = models.ForeignKey(
        PaymentRequest, on_delete=models.CASCADE, related_name="notices", verbose_name=pgettext_lazy("staff", "payment")
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    tx_hash = models.CharField(max_length=66, blank=True, verbose_name=pgettext_lazy("staff", "transaction hash"))
    language = models.CharField(max_length=8, blank=True, verbose_name=pgettext_lazy("staff", "language"))
    checked_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "checked at"))
    result = models.CharField(
        max_length=300,
        blank=True,
        help_text=pgettext_lazy("staff", "What the check of the tx hash found."),
        verbose_name=pgettext_lazy("staff", "result"),
    )

    class Meta:
        verbose_name = pgettext_lazy("staff", "notice")
        verbose_name_plural = pgettext_lazy("staff", "notices")
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return pgettext("staff", "notice %(notice)s for %(payment)s") % {"notice": self.pk, "payment": self.payment_id}


class CreditKind(models.TextChoices):
    MATCH = "match", _("Matches the request")
    LATE = "late", _("After the deadline")
    WRONG_NETWORK = "wrong_network", _("On another network")
    WRONG_ASSET = "wrong_asset", _("Another token or coin")
    GAS = "gas", _("Gas for a refund or sweep, from the shop's gas account")


class CreditQuerySet(models.QuerySet["Credit"]):
    def on_chain(self) -> CreditQuerySet:
        """Transfers the chain still shows (a reorg's removed ones are kept, marked)."""
        return self.filter(removed_at__isnull=True)

    def counted(self) -> CreditQuerySet:
        """What pays the order: on the chain, and not money that arrived after it was settled."""
        return self.on_chain().filter(after_settlement=False)


class Credit(models.Model):
    """One transfer to a deposit address, as the chain showed it. Kept when a reorg removes it."""

    payment = models.ForeignKey(
        PaymentRequest, on_delete=models.PROTECT, related_name="credits", verbose_name=pgettext_lazy("staff", "payment")
    )
    network = models.ForeignKey(
        Network, on_delete=models.PROTECT, related_name="credits", verbose_name=pgettext_lazy("staff", "network")
    )
    # Null for a token the shop does not sell on that network (always a wrong asset): `token_contract` names it.
    asset = models.ForeignKey(
        Asset,
        on_delete=models.PROTECT,
        related_name="credits",
        null=True,
        blank=True,
        verbose_name=pgettext_lazy("staff", "asset"),
    )
    token_contract = models.CharField(
        max_length=42,
        blank=True,
        help_text=pgettext_lazy("staff", "The token's contract; empty for the coin."),
        verbose_name=pgettext_lazy("staff", "token contract"),
    )
    chain_id = models.PositiveBigIntegerField(verbose_name=pgettext_lazy("staff", "chain ID"))
    tx_hash = models.CharField(max_length=66, verbose_name=pgettext_lazy("staff", "transaction hash"))
    log_index = models.IntegerField(
        help_text=pgettext_lazy("staff", "-1 for a native-coin transfer (no log)."),
        verbose_name=pgettext_lazy("staff", "log index"),
    )
    block_number = models.PositiveBigIntegerField(verbose_name=pgettext_lazy("staff", "block number"))
    block_hash = models.CharField(max_length=66, verbose_name=pgettext_lazy("staff", "block hash"))
    block_timestamp = models.DateTimeField(verbose_name=pgettext_lazy("staff", "block timestamp"))
    sender = models.CharField(max_length=42, verbose_name=pgettext_lazy("staff", "sender"))
    amount_base_units = BaseUnitsField(verbose_name=pgettext_lazy("staff", "amount base units"))
    kind = models.CharField(max_length=16, choices=CreditKind.choices, verbose_name=pgettext_lazy("staff", "kind"))
    confirmations = models.PositiveIntegerField(default=0, verbose_name=pgettext_lazy("staff", "confirmations"))
    final = models.BooleanField(default=False, verbose_name=pgettext_lazy("staff", "final"))
    after_settlement = models.BooleanField(
        default=False,
        help_text=pgettext_lazy(
            "staff", "Arrived once the payment was settled: recorded and refundable, never counted."
        ),
        verbose_name=pgettext_lazy("staff", "after settlement"),
    )
    removed_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "removed at"))
    removed_reason = models.CharField(max_length=300, blank=True, verbose_name=pgettext_lazy("staff", "removed reason"))
    evidence = models.JSONField(
        default=dict,
        blank=True,
        help_text=pgettext_lazy("staff", "The log or transaction as the node returned it."),
        verbose_name=pgettext_lazy("staff", "evidence"),
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))

    objects = CreditQuerySet.as_manager()

    class Meta:
        verbose_name = pgettext_lazy("staff", "credit")
        verbose_name_plural = pgettext_lazy("staff", "credits")
        ordering = ["block_number", "log_index"]
        constraints = [
            # A transfer can never pay twice, nor pay two orders.
            models.UniqueConstraint(fields=["chain_id", "tx_hash", "log_index"], name="one_credit_per_transfer"),
        ]
        # The reconfirmation's two reads per network: the credits not final yet, and the final ones still inside
        # the reorg watch (recent blocks), never every credit the network ever had (issue 30).
        indexes = [
            models.Index(
                fields=["network"], condition=Q(final=False, removed_at__isnull=True), name="credit_not_final"
            ),
            models.Index(
                fields=["network", "block_timestamp"], condition=Q(removed_at__isnull=True), name="credit_on_chain_time"
            ),
            models.Index(fields=["-block_timestamp", "-id"], name="credit_newest"),  # the admin's list
            # The ledger reads credits in time order, a page at a time (payments/ledger.py)
            models.Index(
                fields=["block_timestamp", "tx_hash"], condition=Q(removed_at__isnull=True), name="credit_ledger_order"
            ),
            # and the shop's own gas top-ups, a kind of their own there: the few, not every credit filtered
            models.Index(
                fields=["block_timestamp", "tx_hash"],
                condition=Q(kind="gas", removed_at__isnull=True),
                name="credit_gas_ledger_order",
            ),  # fmt: skip
        ]

    def __str__(self) -> str:
        return f"{self.tx_hash}:{self.log_index} -> {self.payment_id}"

    @property
    def on_chain(self) -> bool:
        return self.removed_at is None

    @property
    def counted(self) -> bool:
        """Part of what pays the order: on the chain, and not money that arrived after it was settled."""
        return self.on_chain and not self.after_settlement


class ScanCursor(models.Model):
    """Per network: the next block to scan. It only moves past blocks that were scanned."""

    network = models.OneToOneField(Network, on_delete=models.CASCADE, related_name="scan_cursor")
    next_block = models.PositiveBigIntegerField()
    last_pass_at = models.DateTimeField(null=True, blank=True)
    coin_checked_at = models.DateTimeField(null=True, blank=True)  # payments.coin_watch's last balance check

    class Meta:
        verbose_name = pgettext_lazy("staff", "scan cursor")
        verbose_name_plural = pgettext_lazy("staff", "scan cursors")

    def __str__(self) -> str:
        return f"{self.network.slug}: next block {self.next_block}"


class CoinBaseline(models.Model):
    """A watched address's native-coin balance and nonce on a network at a block (payments.coin_watch): a later
    balance or nonce that differs means coin moved since, and only then are those blocks read in full."""

    network = models.ForeignKey(Network, on_delete=models.CASCADE, related_name="coin_baselines")
    payment = models.ForeignKey(PaymentRequest, on_delete=models.CASCADE, related_name="coin_baselines")
    balance = models.DecimalField(max_digits=78, decimal_places=0)
    nonce = models.PositiveBigIntegerField()
    block_number = models.PositiveBigIntegerField()

    class Meta:
        verbose_name = pgettext_lazy("staff", "coin baseline")
        verbose_name_plural = pgettext_lazy("staff", "coin baselines")
        constraints = [models.UniqueConstraint(fields=["network", "payment"], name="one_coin_baseline_per_network")]

    def __str__(self) -> str:
        return f"{self.payment_id} on {self.network_id} at {self.block_number}"


class ProviderUsage(models.Model):
    """What the scan asked of one RPC provider (a host: never the URL, which carries the API key) of a network,
    summed over every pass of every worker: /metrics' payments_rpc_*_total, and what a provider's plan must
    cover. Only ever incremented in the database (payments.provider_usage)."""

    network = models.ForeignKey(Network, on_delete=models.CASCADE, related_name="provider_usage")
    provider = models.CharField(max_length=200)
    calls = models.PositiveBigIntegerField(default=0)
    requests = models.PositiveBigIntegerField(default=0)
    response_bytes = models.PositiveBigIntegerField(default=0)
    rate_limited = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = pgettext_lazy("staff", "provider usage")
        verbose_name_plural = pgettext_lazy("staff", "provider usages")
        constraints = [models.UniqueConstraint(fields=["network", "provider"], name="one_usage_row_per_provider")]

    def __str__(self) -> str:
        return f"{self.network_id} {self.provider}"


class RefundReason(models.TextChoices):
    OVERPAID = "overpaid", _("More than the quote arrived")
    LATE = "late", _("Paid after the lots were gone")
    CANCELLED = "cancelled", _("The order was cancelled")
    WRONG_ASSET = "wrong_asset", _("Sent in another token, coin or network")
    GOODWILL = "goodwill", _("A reviewer's decision")


class RefundStatus(models.TextChoices):
    AWAITING_ADDRESS = "awaiting_address", _("Waiting for your refund address")
    PENDING_APPROVAL = "pending_approval", _("Waiting for a reviewer's approval")
    APPROVED = "approved", _("Approved: it will be sent")
    SENT = "sent", _("Sent, waiting for confirmations")
    CONFIRMED = "confirmed", _("Confirmed on-chain")
    REJECTED = "rejected", _("Rejected")


REFUND_PLANNED = "named in a treasury plan"  # the reason of the event row each plan writes for its refunds


# Generic in its rows, as QuerySet is: `annotate()` then types each row as a Refund with the annotated names
# (shop.ops_attention reads `since`); a queryset class with its rows fixed would drop them.
_RefundRow = TypeVar("_RefundRow", bound="Refund")


class RefundQuerySet(models.QuerySet["Refund", _RefundRow]):
    def open(self) -> Self:
        """Still being decided: its amount may follow the chain, its address may change."""
        return self.filter(status__in=(RefundStatus.AWAITING_ADDRESS, RefundStatus.PENDING_APPROVAL))

    def committed(self) -> Self:
        """Approved, sent or confirmed: its amount is owed (or paid), it never changes again."""
        return self.filter(status__in=(RefundStatus.APPROVED, RefundStatus.SENT, RefundStatus.CONFIRMED))

    def planned_again(self) -> Self:
        """Approved, and named by two treasury plans or more: the signer may have paid it with no scan having
        recorded it yet (its second payment is refused by the signer's refund register), or a plan was not run."""
        plans = models.Count("events", filter=Q(events__reason__startswith=REFUND_PLANNED))
        return self.filter(status=RefundStatus.APPROVED).annotate(plans=plans).filter(plans__gte=2)


class Refund(models.Model):
    """Money to send back from an order's deposit address, exact in the asset it arrived in.

    Its status moves only through payments.refunds.refund_transition (REFUND_TRANSITIONS), with a RefundEvent.
    """

    payment = models.ForeignKey(
        PaymentRequest, on_delete=models.PROTECT, related_name="refunds", verbose_name=pgettext_lazy("staff", "payment")
    )
    reason = models.CharField(
        max_length=16, choices=RefundReason.choices, verbose_name=pgettext_lazy("staff", "reason")
    )
    network = models.ForeignKey(
        Network, on_delete=models.PROTECT, related_name="refunds", verbose_name=pgettext_lazy("staff", "network")
    )
    chain_id = models.PositiveBigIntegerField(verbose_name=pgettext_lazy("staff", "chain ID"))
    # The asset it arrived in: empty for the native coin; a token the shop does not sell has no Asset row.
    token_contract = models.CharField(max_length=42, blank=True, verbose_name=pgettext_lazy("staff", "token contract"))
    asset = models.ForeignKey(
        Asset,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="refunds",
        verbose_name=pgettext_lazy("staff", "asset"),
    )
    symbol = models.CharField(max_length=16, blank=True, verbose_name=pgettext_lazy("staff", "symbol"))
    decimals = models.PositiveSmallIntegerField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "decimals"))
    amount_base_units = BaseUnitsField(verbose_name=pgettext_lazy("staff", "amount base units"))
    to_address = models.CharField(
        max_length=42, blank=True, validators=[address_validator], verbose_name=pgettext_lazy("staff", "to address")
    )
    status = models.CharField(
        max_length=16,
        choices=RefundStatus.choices,
        default=RefundStatus.AWAITING_ADDRESS,
        verbose_name=pgettext_lazy("staff", "status"),
    )
    tx_hash = models.CharField(max_length=66, blank=True, verbose_name=pgettext_lazy("staff", "transaction hash"))
    block_number = models.PositiveBigIntegerField(
        null=True, blank=True, verbose_name=pgettext_lazy("staff", "block number")
    )
    created_at = models.DateTimeField(default=timezone.now, verbose_name=pgettext_lazy("staff", "created at"))
    # When the scan first saw its transfer (its first move to `sent`): the ledger's time for it, set once by
    # refund_transition. A reorg that sends it back to approved keeps it; the transfer seen again is the same.
    sent_at = models.DateTimeField(null=True, blank=True, verbose_name=pgettext_lazy("staff", "sent at"))
    decided_by = models.CharField(max_length=150, blank=True, verbose_name=pgettext_lazy("staff", "decided by"))

    objects = RefundQuerySet.as_manager()

    class Meta:
        verbose_name = pgettext_lazy("staff", "refund")
        verbose_name_plural = pgettext_lazy("staff", "refunds")
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(condition=Q(amount_base_units__gt=0), name="refund_amount_positive"),
            models.CheckConstraint(
                condition=Q(sent_at__isnull=False) | ~Q(status__in=["sent", "confirmed"]), name="refund_sent_has_time"
            ),
        ]
        indexes = [
            # The scan watches the addresses of refunds leaving (payments.watched): the few open, not every refund
            models.Index(fields=["payment"], condition=Q(status__in=["approved", "sent"]), name="refund_leaving"),
            # The ledger reads the refunds sent in time order, a page at a time (issue 30)
            models.Index(
                fields=["sent_at", "tx_hash"], condition=Q(status__in=["sent", "confirmed"]), name="refund_ledger_order"
            ),
        ]

    def __str__(self) -> str:
        words = pgettext("staff", "refund %(refund)s: %(amount)s (%(reason)s)")
        return words % {"refund": self.pk, "amount": self.amount_text, "reason": self.get_reason_display()}

    @property
    def amount_text(self) -> str:
        if self.decimals is None:
            words = pgettext("staff", "%(base_units)s base units of token %(contract)s")
            return words % {"base_units": self.amount_base_units, "contract": self.token_contract}
        return f"{format_units(int(self.amount_base_units), self.decimals)} {self.symbol}"


class RefundEvent(TransitionEvent):
    """One row per change of a refund's status (who, when, from, to, why), written by refund_transition."""

    refund = models.ForeignKey(
        Refund, on_delete=models.CASCADE, related_name="events", verbose_name=pgettext_lazy("staff", "refund")
    )
    from_status = models.CharField(
        max_length=16, choices=RefundStatus.choices, blank=True, verbose_name=pgettext_lazy("staff", "from status")
    )
    to_status = models.CharField(
        max_length=16, choices=RefundStatus.choices, verbose_name=pgettext_lazy("staff", "to status")
    )

    class Meta(TransitionEvent.Meta):
        verbose_name = pgettext_lazy("staff", "refund event")
        verbose_name_plural = pgettext_lazy("staff", "refund events")

    def __str__(self) -> str:
        moved = f"{self.get_from_status_display() or '-'} -> {self.get_to_status_display()}"
        return pgettext("staff", "refund %(refund)s: %(moved)s") % {"refund": self.refund_id, "moved": moved}


class Outflow(models.Model):
    """A transfer out of a deposit address, as the chain showed it: one row per transfer (chain, tx, log)."""

    chain_id = models.PositiveBigIntegerField()
    token_contract = models.CharField(max_length=42, blank=True, help_text="The token's contract; empty for the coin.")
    to_address = models.CharField(max_length=42)
    amount_base_units = BaseUnitsField()
    tx_hash = models.CharField(max_length=66)
    log_index = models.IntegerField(help_text="-1 for a native-coin transfer (no log).")
    block_number = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True


class Sweep(Outflow):
    """A transfer out of a deposit address to the network's treasury.

    `final` and `removed_at` are set only by payments.outflows (final by the network's rule; removed by a reorg)."""

    payment = models.ForeignKey(PaymentRequest, on_delete=models.PROTECT, related_name="sweeps")
    network = models.ForeignKey(Network, on_delete=models.PROTECT, related_name="sweeps")
    block_hash = models.CharField(max_length=66)
    final = models.BooleanField(default=False)
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = pgettext_lazy("staff", "sweep")
        verbose_name_plural = pgettext_lazy("staff", "sweeps")
        ordering = ["block_number", "log_index"]
        constraints = [
            models.UniqueConstraint(fields=["chain_id", "tx_hash", "log_index"], name="one_sweep_per_transfer"),
        ]
        # The sweeps' reconfirmation reads only those not final; the ledger reads them in time order (issue 30)
        indexes = [
            models.Index(fields=["network"], condition=Q(final=False, removed_at__isnull=True), name="sweep_not_final"),
            models.Index(
                fields=["created_at", "tx_hash"], condition=Q(removed_at__isnull=True), name="sweep_ledger_order"
            ),
        ]

    def __str__(self) -> str:
        return f"sweep {self.tx_hash}:{self.log_index} from {self.payment_id}"


class UnexpectedOutflow(Outflow):
    """Money that left a deposit address for neither an approved refund nor the treasury: perhaps a leaked key.

    `acknowledged_at`/`acknowledged_by` are written only by payments.outflows.outflow_acknowledge."""

    payment = models.ForeignKey(PaymentRequest, on_delete=models.PROTECT, related_name="unexpected_outflows")
    network = models.ForeignKey(Network, on_delete=models.PROTECT, related_name="unexpected_outflows")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True)

    class Meta:
        verbose_name = pgettext_lazy("staff", "unexpected outflow")
        verbose_name_plural = pgettext_lazy("staff", "unexpected outflows")
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["chain_id", "tx_hash", "log_index"], name="one_outflow_per_transfer"),
        ]

    def __str__(self) -> str:
        return f"unexpected outflow {self.tx_hash}:{self.log_index} from {self.payment_id}"
