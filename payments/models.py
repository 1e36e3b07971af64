"""Networks and assets (data staff edit), USD rates, and the payment request of each order."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

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
    slug = models.SlugField(unique=True, help_text="CHAIN_RPC_URLS_<SLUG> configures its RPC URLs.")
    name = models.CharField(max_length=100)
    chain_id = models.PositiveBigIntegerField(unique=True)
    finality = models.CharField(
        max_length=16,
        choices=Finality.choices,
        default=Finality.FINALIZED,
        help_text="blocks:N counts confirmations_required blocks; safe and finalized wait for the node's tag.",
    )
    confirmations_required = models.PositiveSmallIntegerField(
        default=12, help_text="N of blocks:N; with every rule, how many recent blocks each pass reads again."
    )
    finality_wait_seconds = models.PositiveIntegerField(
        default=900, help_text="About how long a transfer takes to become final: shown to the customer."
    )
    explorer_tx_url = models.CharField(
        max_length=200, blank=True, help_text="With {tx} where the transaction hash goes."
    )
    is_development = models.BooleanField(default=False, help_text="A local chain for development and demos.")
    enabled = models.BooleanField(default=True)
    position = models.PositiveSmallIntegerField(default=0)
    # Verification policy, as data.
    max_head_age_seconds = models.PositiveIntegerField(
        default=180, help_text="A head older than this counts as down (0: no check, for a chain idle between txs)."
    )
    max_block_range = models.PositiveIntegerField(default=1000, help_text="Blocks per eth_getLogs call.")
    # An L2's Chainlink sequencer uptime feed: while the sequencer is down (or just back), the L2's price feeds
    # are not updated however fresh they look, so none of them prices a quote (payments.price_feeds).
    sequencer_uptime_feed = models.CharField(
        max_length=42,
        blank=True,
        default="",
        validators=[address_validator],
        help_text="L2 only: Chainlink's sequencer uptime feed; empty on an L1 or where there is none.",
    )
    # The verifier's health, written by each scan pass; a network known to be down is not offered.
    rpc_ok = models.BooleanField(null=True, blank=True, help_text="Unknown until the first scan pass.")
    rpc_checked_at = models.DateTimeField(null=True, blank=True)
    rpc_error = models.CharField(max_length=300, blank=True)
    head_block = models.PositiveBigIntegerField(null=True, blank=True)
    # Failed contacts with the RPC since the network was added: /metrics' payments_rpc_errors_total, counted in
    # the row (not in one process's memory) so that every worker's failures add up and survive a restart.
    rpc_errors = models.PositiveBigIntegerField(default=0, editable=False)
    scan_lag_budget_blocks = models.PositiveIntegerField(
        default=100,
        help_text="How far the scan may fall behind the head (about five minutes of blocks) before an alert fires.",
    )
    # A claim on the network's scan, so that two workers never scan it at once.
    scan_lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
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
    network = models.ForeignKey(Network, on_delete=models.PROTECT, related_name="assets")
    symbol = models.CharField(max_length=12)
    name = models.CharField(max_length=60)
    decimals = models.PositiveSmallIntegerField(validators=[MaxValueValidator(36)])
    # Null (not blank) for the native coin, so the "one native coin per network" constraint can see it.
    contract = models.CharField(max_length=42, null=True, blank=True, validators=[address_validator])  # noqa: DJ001
    # Stablecoins are priced 1:1 in USD; anything else needs a fresh Rate.
    usd_stable = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    # A Chainlink-style USD aggregator on the asset's own network, read at quote time (payments.price_feeds).
    price_feed = models.CharField(  # noqa: DJ001 - null = no feed: staff rates only
        max_length=42,
        null=True,
        blank=True,
        validators=[address_validator],
        help_text="USD price feed (AggregatorV3Interface) on this network; empty: staff-entered rates only.",
    )
    price_feed_heartbeat_seconds = models.PositiveIntegerField(
        default=3600, help_text="The feed's heartbeat: an answer older than this is refused."
    )

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

    def __str__(self) -> str:
        return f"{self.key_fingerprint[:12]}: next {self.next_index}"


class PaymentRequestQuerySet(models.QuerySet):
    def watched(self, now) -> PaymentRequestQuerySet:
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
    order = models.ForeignKey("shop.Order", on_delete=models.PROTECT, related_name="payments")
    extension = models.OneToOneField(
        "shop.Extension", on_delete=models.PROTECT, null=True, blank=True, related_name="payment"
    )
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
    amount_base_units = BaseUnitsField()
    expires_at = models.DateTimeField()
    start_block = models.PositiveBigIntegerField(help_text="Only transfers from this block on count.")
    # Coin already on the address before start_block is not the customer's: read once, when a balance
    # shows more than the credits explain (payments/native.py).
    opening_balance_base_units = BaseUnitsField(null=True, blank=True)

    # The address stays watched long after the quote's window: late money reaches a reviewer.
    watch_until = models.DateTimeField(null=True, blank=True)
    # Set by each treasury plan that names the address (payments/treasury.py): the scan reads it until then,
    # whatever its window or status, so the signer's sweep of it is recorded.
    plan_watch_until = models.DateTimeField(null=True, blank=True)
    # The books say money is on the address (payments.books): kept by every credit and every movement out.
    holds_money = models.BooleanField(default=False)

    status = models.CharField(max_length=16, choices=PaymentStatus.choices, default=PaymentStatus.PENDING)
    received_base_units = BaseUnitsField(default=0)
    confirmations = models.PositiveIntegerField(default=0)
    # What must be sent back, per asset it arrived in (payments/refunds_due.py): a list of
    # {"network", "chain_id", "asset", "contract", "decimals", "base_units"}; never one sum across assets.
    refunds_due = models.JSONField(default=list, blank=True)
    refund_decided_at = models.DateTimeField(null=True, blank=True)
    # When the payment became confirmed (or a reviewer accepted it): money that arrives later never
    # changes its status or its order's (anyone can send dust to a public address); cleared by a reorg
    # that takes the settling money away.
    settled_at = models.DateTimeField(null=True, blank=True)
    # Set when a reviewer accepts or rejects: automatic settlement then only refreshes the figures.
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = PaymentRequestQuerySet.as_manager()

    class Meta:
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

    payment = models.ForeignKey(PaymentRequest, on_delete=models.CASCADE, related_name="events")
    created_at = models.DateTimeField(default=timezone.now)
    from_status = models.CharField(max_length=16, choices=PaymentStatus.choices, blank=True)
    to_status = models.CharField(max_length=16, choices=PaymentStatus.choices)
    actor = models.CharField(max_length=150)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["-created_at", "-id"], name="payment_event_newest")]  # the admin's list

    def __str__(self) -> str:
        return f"{self.payment_id}: {self.from_status or '-'} -> {self.to_status}"


class Notice(models.Model):
    """The customer's "I have paid": a request to look now, never proof of payment."""

    payment = models.ForeignKey(PaymentRequest, on_delete=models.CASCADE, related_name="notices")
    created_at = models.DateTimeField(default=timezone.now)
    tx_hash = models.CharField(max_length=66, blank=True)
    language = models.CharField(max_length=8, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    result = models.CharField(max_length=300, blank=True, help_text="What the check of the tx hash found.")

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"notice {self.pk} for {self.payment_id}"


class CreditKind(models.TextChoices):
    MATCH = "match", _("Matches the request")
    LATE = "late", _("After the deadline")
    WRONG_NETWORK = "wrong_network", _("On another network")
    WRONG_ASSET = "wrong_asset", _("Another token or coin")
    GAS = "gas", _("Gas for a refund or sweep, from the shop's gas account")


class CreditQuerySet(models.QuerySet):
    def on_chain(self) -> CreditQuerySet:
        """Transfers the chain still shows (a reorg's removed ones are kept, marked)."""
        return self.filter(removed_at__isnull=True)

    def counted(self) -> CreditQuerySet:
        """What pays the order: on the chain, and not money that arrived after it was settled."""
        return self.on_chain().filter(after_settlement=False)


class Credit(models.Model):
    """One transfer to a deposit address, as the chain showed it. Kept when a reorg removes it."""

    payment = models.ForeignKey(PaymentRequest, on_delete=models.PROTECT, related_name="credits")
    network = models.ForeignKey(Network, on_delete=models.PROTECT, related_name="credits")
    # Null for a token the shop does not sell on that network (always a wrong asset): `token_contract` names it.
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="credits", null=True, blank=True)
    token_contract = models.CharField(max_length=42, blank=True, help_text="The token's contract; empty for the coin.")
    chain_id = models.PositiveBigIntegerField()
    tx_hash = models.CharField(max_length=66)
    log_index = models.IntegerField(help_text="-1 for a native-coin transfer (no log).")
    block_number = models.PositiveBigIntegerField()
    block_hash = models.CharField(max_length=66)
    block_timestamp = models.DateTimeField()
    sender = models.CharField(max_length=42)
    amount_base_units = BaseUnitsField()
    kind = models.CharField(max_length=16, choices=CreditKind.choices)
    confirmations = models.PositiveIntegerField(default=0)
    final = models.BooleanField(default=False)
    after_settlement = models.BooleanField(
        default=False, help_text="Arrived once the payment was settled: recorded and refundable, never counted."
    )
    removed_at = models.DateTimeField(null=True, blank=True)
    removed_reason = models.CharField(max_length=300, blank=True)
    evidence = models.JSONField(default=dict, blank=True, help_text="The log or transaction as the node returned it.")
    created_at = models.DateTimeField(default=timezone.now)

    objects = CreditQuerySet.as_manager()

    class Meta:
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
                fields=["block_timestamp", "tx_hash"], condition=Q(kind="gas", removed_at__isnull=True),
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


class RefundQuerySet(models.QuerySet):
    def open(self) -> RefundQuerySet:
        """Still being decided: its amount may follow the chain, its address may change."""
        return self.filter(status__in=(RefundStatus.AWAITING_ADDRESS, RefundStatus.PENDING_APPROVAL))

    def committed(self) -> RefundQuerySet:
        """Approved, sent or confirmed: its amount is owed (or paid), it never changes again."""
        return self.filter(status__in=(RefundStatus.APPROVED, RefundStatus.SENT, RefundStatus.CONFIRMED))

    def planned_again(self) -> RefundQuerySet:
        """Approved, and named by two treasury plans or more: the signer may have paid it with no scan having
        recorded it yet (its second payment is refused by the signer's refund register), or a plan was not run."""
        plans = models.Count("events", filter=Q(events__reason__startswith=REFUND_PLANNED))
        return self.filter(status=RefundStatus.APPROVED).annotate(plans=plans).filter(plans__gte=2)


class Refund(models.Model):
    """Money to send back from an order's deposit address, exact in the asset it arrived in.

    Its status moves only through payments.refunds.refund_transition (REFUND_TRANSITIONS), with a RefundEvent.
    """

    payment = models.ForeignKey(PaymentRequest, on_delete=models.PROTECT, related_name="refunds")
    reason = models.CharField(max_length=16, choices=RefundReason.choices)
    network = models.ForeignKey(Network, on_delete=models.PROTECT, related_name="refunds")
    chain_id = models.PositiveBigIntegerField()
    # The asset it arrived in: empty for the native coin; a token the shop does not sell has no Asset row.
    token_contract = models.CharField(max_length=42, blank=True)
    asset = models.ForeignKey(Asset, on_delete=models.PROTECT, null=True, blank=True, related_name="refunds")
    symbol = models.CharField(max_length=16, blank=True)
    decimals = models.PositiveSmallIntegerField(null=True, blank=True)
    amount_base_units = BaseUnitsField()
    to_address = models.CharField(max_length=42, blank=True, validators=[address_validator])
    status = models.CharField(max_length=16, choices=RefundStatus.choices, default=RefundStatus.AWAITING_ADDRESS)
    tx_hash = models.CharField(max_length=66, blank=True)
    block_number = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # When the scan first saw its transfer (its first move to `sent`): the ledger's time for it, set once by
    # refund_transition. A reorg that sends it back to approved keeps it; the transfer seen again is the same.
    sent_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=150, blank=True)

    objects = RefundQuerySet.as_manager()

    class Meta:
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
        return f"refund {self.pk}: {self.amount_text} ({self.reason})"

    @property
    def amount_text(self) -> str:
        if self.decimals is None:
            return f"{self.amount_base_units} base units of token {self.token_contract}"
        return f"{format_units(int(self.amount_base_units), self.decimals)} {self.symbol}"


class RefundEvent(TransitionEvent):
    """One row per change of a refund's status (who, when, from, to, why), written by refund_transition."""

    refund = models.ForeignKey(Refund, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, choices=RefundStatus.choices, blank=True)
    to_status = models.CharField(max_length=16, choices=RefundStatus.choices)

    def __str__(self) -> str:
        return f"refund {self.refund_id}: {self.from_status or '-'} -> {self.to_status}"


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
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["chain_id", "tx_hash", "log_index"], name="one_outflow_per_transfer"),
        ]

    def __str__(self) -> str:
        return f"unexpected outflow {self.tx_hash}:{self.log_index} from {self.payment_id}"
