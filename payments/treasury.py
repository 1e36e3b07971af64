"""The treasury plan: per network, what the treasurer's signer (`python -m payments.signer`) pays back and
sweeps, read from the chain now. The server only plans: it holds no key, and the signer refuses a plan whose
addresses do not derive from the treasurer's own mnemonic.

An address is in the plan once every transfer it received is final. Approved refunds are paid from it first;
money owed to refunds not approved yet stays on it; the rest of a settled (or rejected) payment's address goes
to the treasury (`TREASURY_ADDRESS_<NETWORK>`, else `TREASURY_ADDRESS`; with neither, nothing is swept).

Every address a plan names is watched by the scan for PAYMENT_WATCH_DAYS more (`plan_watch_until`), whatever its
payment's window or status, and an approved refund keeps its address watched until it is confirmed
(PaymentRequest.objects.watched): what the signer sends from it is recorded, so a refund it paid is never planned
again. Each refund a plan names gets an event row (REFUND_PLANNED): a refund named by two plans is visible to staff.

The plan is written in the signer's own format (`payments/signer/plan.py`, no Django): typed values here, JSON only
at the API (`Plan.to_json()`), read back by the signer with `Plan.from_json`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from eth_utils import is_address, to_checksum_address

from payments.addresses import gas_account_address, key_fingerprint
from payments.books import books_left
from payments.models import (
    REFUND_PLANNED,
    Credit,
    Network,
    PaymentRequest,
    PaymentStatus,
    Refund,
    RefundEvent,
    RefundStatus,
)
from payments.networks import rpc_client, treasury_address
from payments.rpc import RpcClient
from payments.signer.plan import GAS_ACCOUNT_PATH, HeldBack, Plan, PlanItem, PlanRefund

# Gas per transfer, a little above what anvil measured (docs/staff-guide.md, "Collecting and refunding":
# 46,872-51,672 for a token transfer); the plan's estimate only. A token address also gets one gas top-up (a
# native transfer).
TOKEN_TRANSFER_GAS = 65_000
NATIVE_TRANSFER_GAS = 21_000
BALANCE_OF = "0x70a08231"  # balanceOf(address)
OPEN = (RefundStatus.AWAITING_ADDRESS, RefundStatus.PENDING_APPROVAL)
REJECTED = PaymentStatus.REJECTED
HELD_BACK_REASON = "approved refunds exceed the balance: a reviewer looks at the address first"


def deposit_path(payment: PaymentRequest) -> str:
    return f"m/44'/60'/0'/0/{payment.derivation_index}"


def _plannable(network: Network) -> list[PaymentRequest]:
    """This network's deposit addresses whose every transfer is final and that owe or hold something. Only those
    the books say hold money (`holds_money`, kept by payments.books) or owe an approved refund are read: the plan
    costs what is left to collect, not every payment the network ever had (issue 30)."""
    # One indexed read per reason joined by UNION ALL: an OR of them with a join to the credits read every credit
    # of the history (105 ms at 100,000 orders, 1.25 s at 1,000,000).
    holding = PaymentRequest.objects.filter(holds_money=True).values("pk")
    owing = Refund.objects.filter(status=RefundStatus.APPROVED).values("payment_id")
    payments = (
        PaymentRequest.objects.filter(chain_id=network.chain_id, key_fingerprint=key_fingerprint())
        .filter(pk__in=holding.union(owing, all=True))
        .filter(Exists(Credit.objects.filter(payment=OuterRef("pk"))))
        .select_related("order")
        .prefetch_related("credits", "refunds", "sweeps", "unexpected_outflows")
        .order_by("derivation_index")
    )
    return [p for p in payments if all(credit.final for credit in p.credits.all() if credit.on_chain)]


def _assets_on(payment: PaymentRequest) -> list[str]:
    """The contracts ('' for the coin) the address received that its books say are still on it. The books:
    what arrived (the shop's own gas top-ups aside: fees spend them), less the refunds sent, the sweeps and the
    unexpected outflows the scan saw (payments.books). An address emptied long ago is not read again, so the plan
    costs what is left to collect, not every address the shop ever used."""
    left = books_left(payment)
    owed = {r.token_contract.lower() for r in payment.refunds.all() if r.status == RefundStatus.APPROVED}
    return sorted(contract for contract, amount in left.items() if amount > 0 or contract in owed)


def _balances(client: RpcClient, wanted: list[tuple[str, str]]) -> list[int]:
    calls = []
    for address, contract in wanted:
        if contract:
            data = BALANCE_OF + address.lower()[2:].rjust(64, "0")
            calls.append(("eth_call", [{"to": contract, "data": data}, "latest"]))
        else:
            calls.append(("eth_getBalance", [address, "latest"]))
    return [int(answer or "0x0", 16) for answer in client.batch(calls)]


def treasury_plan(*, network: Network, client: RpcClient | None = None) -> Plan:
    """The network's plan, in the signer's own format (payments.signer.plan): `.to_json()` is what the API answers."""
    client = client or rpc_client(network)
    configured = treasury_address(network)
    treasury = to_checksum_address(configured) if is_address(configured) else None
    payments = _plannable(network)
    wanted = [(payment, contract) for payment in payments for contract in _assets_on(payment)]
    balances = _balances(client, [(payment.address, contract) for payment, contract in wanted])
    symbols = {(a.contract or "").lower(): a.symbol for a in network.assets.all()}
    items: list[PlanItem] = []
    held_back: list[HeldBack] = []
    transfers: defaultdict[str, int] = defaultdict(int)  # by kind: token, native
    planned_payments: set[int] = set()
    planned_refunds: list[Refund] = []
    for (payment, contract), balance in zip(wanted, balances, strict=True):
        refunds = [
            r for r in payment.refunds.all() if r.token_contract.lower() == contract and r.chain_id == network.chain_id
        ]
        approved = [r for r in refunds if r.status == RefundStatus.APPROVED and r.to_address]
        held = sum(int(r.amount_base_units) for r in refunds if r.status in OPEN)
        owed = sum(int(r.amount_base_units) for r in approved)
        sweepable = treasury is not None and (payment.settled_at is not None or payment.status == REJECTED)
        sweep = max(0, balance - owed - held) if sweepable else 0
        address = to_checksum_address(payment.address)
        asset = symbols.get(contract, "")
        token = to_checksum_address(contract) if contract else None
        if owed > balance:  # money left the address that the refunds counted on (a leaked key?): nothing is sent
            held_back.append(
                HeldBack(
                    address=address,
                    order=payment.order.reference,
                    asset=asset,
                    contract=token,
                    balance=balance,
                    owed=owed,
                    reason=HELD_BACK_REASON,
                )
            )
            continue
        if balance == 0 or (not approved and sweep == 0):
            continue  # nothing to send
        items.append(
            PlanItem(
                address=address,
                order=payment.order.reference,
                asset=asset,
                contract=token,
                balance=balance,
                derivation_path=deposit_path(payment),
                refunds=tuple(
                    PlanRefund(id=r.pk, to_address=r.to_address, amount=int(r.amount_base_units)) for r in approved
                ),
                sweep=sweep,
            )
        )
        planned_payments.add(payment.pk)
        planned_refunds += approved
        transfers["token" if contract else "native"] += len(approved) + (1 if sweep else 0)
        transfers["native"] += 1 if contract else 0  # the token address's gas top-up
    _planned_record(network=network, payment_ids=planned_payments, refunds=planned_refunds)
    gas_account = gas_account_address()
    gas_price, gas_balance = client.batch([("eth_gasPrice", []), ("eth_getBalance", [gas_account, "latest"])])
    gas_units = transfers["token"] * TOKEN_TRANSFER_GAS + transfers["native"] * NATIVE_TRANSFER_GAS
    return Plan(
        network=network.slug,
        chain_id=network.chain_id,
        treasury=treasury,
        gas_account=gas_account,
        gas_account_path=GAS_ACCOUNT_PATH,
        gas_account_balance_wei=int(gas_balance, 16),
        gas_price_wei=int(gas_price, 16),
        gas_estimate_wei=gas_units * int(gas_price, 16),
        items=tuple(items),
        held_back=tuple(held_back),
    )


def _planned_record(
    *, network: Network, payment_ids: set[int], refunds: list[Refund], now: dt.datetime | None = None
) -> None:
    """The scan reads every address this plan sends from until the signer has surely run (a sweep of an
    address past its window, or of a rejected payment, is recorded too), and each planned refund gets an event
    row: staff see a refund that two plans named (paid, and not recorded yet, or a plan that was not run)."""
    now = now or timezone.now()
    until = now + dt.timedelta(days=settings.PAYMENT_WATCH_DAYS)
    with transaction.atomic():
        PaymentRequest.objects.filter(pk__in=payment_ids).update(plan_watch_until=until)
        RefundEvent.objects.bulk_create(
            RefundEvent(
                refund=refund,
                created_at=now,
                from_status=refund.status,
                to_status=refund.status,
                actor="treasury plan",
                reason=f"{REFUND_PLANNED} of {network.slug}",
            )
            for refund in refunds
        )
