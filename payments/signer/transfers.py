"""Carrying out one plan item: its gas top-up (tokens), its refunds, then its sweep, each journaled before it is
broadcast (see the package docstring for the rerun rule)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3.exceptions import Web3RPCError
from web3.types import TxReceipt

from payments.signer.chain import Chain, WouldRevert, transfer_data
from payments.signer.journal import Journal, RefundRegister, refund_key, transfer_name
from payments.signer.plan import Plan, PlanItem

NATIVE_TRANSFER_GAS = 21_000
# A transfer still to check and send: (its name in the journal, its kind, to, amount).
Pending = tuple[str, str, str, int]


@dataclass
class Sent:
    """One line of the report: a transaction sent (or, in a dry run, that would be sent)."""

    kind: str  # refund, sweep or gas
    name: str
    sender: str
    to: str
    amount: int
    asset: str
    tx_hash: str | None = None
    status: str = "pending"  # mined, reverted, failed, would send
    gas_limit: int = 0
    max_fee_per_gas: int = 0
    gas_used: int | None = None
    fee_paid: int | None = None
    resumed: bool = False  # found in the journal (sent by an earlier run), not signed by this one
    earlier_plan: bool = False  # a refund found in the refund register: signed for an earlier plan

    def line(self) -> str:
        gas = f"gas {self.gas_used}" if self.gas_used is not None else f"gas limit {self.gas_limit}"
        return (
            f"{self.kind:<6} {self.sender} -> {self.to} {self.amount} {self.asset} "
            f"tx {self.tx_hash or '-'} {self.status}{self._origin} {gas}"
        )

    @property
    def _origin(self) -> str:
        if self.earlier_plan:
            return " (sent by an earlier plan: not sent again)"
        return " (journal)" if self.resumed else ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class ItemRefused(Exception):
    """An item whose plan does not fit the chain now: it is skipped, the run ends with exit 1."""


class Signer:
    def __init__(
        self,
        chain: Chain,
        plan: Plan,
        journal: Journal,
        *,
        dry_run: bool,
        echo: Callable[[str], object],
        register: RefundRegister | None = None,
    ) -> None:
        self.chain, self.plan, self.journal, self.dry_run, self.echo = chain, plan, journal, dry_run, echo
        self.register = register
        # Each refund's transfer name in this plan -> its key in the register, the same in every plan.
        self.refund_keys = {
            transfer_name(item.address, item.contract, f"refund:{refund.id}"): refund_key(plan.chain_id, refund.id)
            for item in plan.items
            for refund in item.refunds
        }
        self.sent: list[Sent] = []
        self.chain_id = plan.chain_id
        # Where money may go: the plan's refund addresses and treasury; gas only to its deposit addresses.
        self.payees = {plan.treasury} - {None} | {refund.to_address for item in plan.items for refund in item.refunds}
        self.deposits = {item.address for item in plan.items}

    # One transaction: signed, journaled, broadcast, waited for; or resumed from the journal.
    def _record(self, sent: Sent) -> Sent:
        self.sent.append(sent)
        self.echo(sent.line())
        if sent.status not in ("mined", "would send"):  # the item's next transfers wait for a rerun
            raise ItemRefused(f"{sent.sender}: {sent.kind} {sent.tx_hash} {sent.status}")
        return sent

    def _finish(self, sent: Sent, receipt: TxReceipt) -> Sent:
        sent.gas_used = int(receipt["gasUsed"])
        sent.fee_paid = sent.gas_used * int(receipt["effectiveGasPrice"])
        sent.status = "mined" if int(receipt["status"]) == 1 else "reverted"
        return self._record(sent)

    def resume(self, sent: Sent, entry: dict[str, Any]) -> Sent:
        """A journaled transfer: its receipt if mined; else the same bytes again, unless its nonce is taken."""
        sent.tx_hash, sent.gas_limit, sent.max_fee_per_gas = entry["hash"], entry["gas"], entry["max_fee_per_gas"]
        sent.amount, sent.resumed = entry["amount"], True
        receipt = self.chain.receipt(sent.tx_hash)
        if receipt is None and self.dry_run:
            sent.status = "would send"  # the journaled bytes, again
            return self._record(sent)
        if receipt is None:
            if not self.chain.known(sent.tx_hash):
                if self.chain.nonce(sent.sender, "latest") > entry["nonce"]:
                    sent.status = "failed: its nonce was used by another transaction; check the address by hand"
                    return self._record(sent)
                self.chain.broadcast(bytes.fromhex(entry["raw"]), sent.tx_hash)
            receipt = self.chain.wait(sent.tx_hash)
        return self._finish(sent, receipt)

    def send(self, sent: Sent, account: LocalAccount, *, contract: str | None, gas: int, fee: tuple[int, int]) -> Sent:
        if sent.to not in (self.deposits if sent.kind == "gas" else self.payees):
            raise AssertionError(f"{sent.to} is not a destination of the plan")  # a bug here, never sent
        max_fee, tip = fee
        sent.gas_limit, sent.max_fee_per_gas = gas, max_fee
        tx: dict[str, Any] = {
            "type": 2,
            "chainId": self.chain_id,
            "nonce": self.chain.nonce(account.address),
            "gas": gas,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": min(tip, max_fee),
        }
        if contract is None:
            tx.update(to=sent.to, value=sent.amount, data=b"")
        else:
            tx.update(to=contract, value=0, data=transfer_data(sent.to, sent.amount))
        if self.dry_run:
            sent.status = "would send"
            return self._record(sent)
        signed = Account.sign_transaction(tx, account.key)
        sent.tx_hash = "0x" + bytes(signed.hash).hex()
        # Written and flushed before the broadcast: a crash after it leaves a rerun the same bytes to resend.
        entry = {"nonce": tx["nonce"], "hash": sent.tx_hash, "raw": bytes(signed.raw_transaction).hex()}
        entry = {**entry, "gas": gas, "max_fee_per_gas": max_fee, "amount": sent.amount}
        self.journal.record(sent.name, entry)
        self._register(sent.name, sent.sender, entry)
        try:
            self.chain.broadcast(bytes(signed.raw_transaction), sent.tx_hash)
        except Web3RPCError as error:
            self.journal.forget(sent.name)
            if self.register is not None and sent.name in self.refund_keys:
                self.register.forget(self.refund_keys[sent.name])
            sent.status = f"refused by the node: {error}"
            return self._record(sent)
        return self._finish(sent, self.chain.wait(sent.tx_hash))

    def journaled(self, name: str) -> dict[str, Any] | None:
        return self.journal.get(name)

    def _register(self, name: str, sender: str, entry: dict[str, Any]) -> None:
        """A refund's signed transfer, in the register too (written before its broadcast, as in the journal)."""
        if self.register is None or self.dry_run or name not in self.refund_keys:
            return
        key = self.refund_keys[name]
        if self.register.get(key) is None:
            self.register.record(key, {**entry, "plan": self.plan.digest, "sender": sender})

    def _registered(self, name: str, sender: str) -> dict[str, Any] | None:
        """The transfer an earlier plan signed for this refund, if any: resumed, never signed again."""
        entry = self.register.get(self.refund_keys[name]) if self.register is not None else None
        if entry is not None and entry.get("sender") != sender:
            raise ItemRefused(f"{self.refund_keys[name]} was signed from {entry.get('sender')}, not {sender}")
        return entry

    # One item.
    def carry_out(self, item: PlanItem, account: LocalAccount, gas_account: LocalAccount) -> None:
        try:
            self._carry_out(item, account, gas_account)
        except WouldRevert as error:
            raise ItemRefused(str(error)) from error

    def _carry_out(self, item: PlanItem, account: LocalAccount, gas_account: LocalAccount) -> None:
        slots = [(f"refund:{refund.id}", "refund", refund.to_address, refund.amount) for refund in item.refunds]
        if item.sweep > 0:
            assert self.plan.treasury is not None, (
                "a plan that sweeps names its treasury (Plan.parse refuses one without)"
            )
            slots.append(("sweep", "sweep", self.plan.treasury, item.sweep))
        gas_names = self._gas_names(item)
        # What the journal holds is resumed first (in the order it was sent), then the rest is checked and sent.
        for name in gas_names:
            journaled = self.journaled(name)
            assert journaled is not None, "_gas_names lists journaled names only"
            self.resume(self._sent("gas", item, gas_account.address, item.address, 0, name), journaled)
        pending = []
        for what, kind, to, amount in slots:
            name = transfer_name(item.address, item.contract, what)
            entry = self.journaled(name)
            if entry is not None:
                self._register(name, account.address, entry)  # signed before the register knew it
                self.resume(self._sent(kind, item, account.address, to, amount, name), entry)
            elif kind == "refund" and (earlier := self._registered(name, account.address)) is not None:
                # Paid (or pending) by an earlier plan that the shop has not recorded yet: that transfer, not a new one.
                sent = self._sent(kind, item, account.address, to, amount, name)
                sent.earlier_plan = True
                self.resume(sent, earlier)
            else:
                pending.append((name, kind, to, amount))
        if not pending:
            return
        fresh = len(pending) == len(slots)
        self._check_balance(item, pending, fresh)
        if item.is_native:
            self._native(item, account, pending)
        else:
            self._token(item, account, gas_account, pending, len(gas_names))

    def _sent(self, kind: str, item: PlanItem, sender: str, to: str, amount: int, name: str) -> Sent:
        # A gas top-up moves the chain's coin whatever the item's asset: its amount is in wei.
        return Sent(
            kind=kind, name=name, sender=sender, to=to, amount=amount, asset="wei" if kind == "gas" else item.asset
        )

    def _gas_names(self, item: PlanItem) -> list[str]:
        names, number = [], 1
        while self.journaled(transfer_name(item.address, item.contract, f"gas:{number}")) is not None:
            names.append(transfer_name(item.address, item.contract, f"gas:{number}"))
            number += 1
        return names

    def _check_balance(self, item: PlanItem, pending: list[Pending], fresh: bool) -> None:
        """refunds + sweep <= the balance now (a first run); after a partial run, what is left to refund <= it.
        A refund or sweep already paid leaves less than the plan's sum, so a lost journal cannot pay twice."""
        balance = self.chain.balance(item.contract, item.address)
        if fresh:
            needed = sum(refund.amount for refund in item.refunds) + item.sweep
        else:
            needed = sum(amount for _, kind, _, amount in pending if kind == "refund" or not item.is_native)
        if needed > balance:
            raise ItemRefused(
                f"{item.address}: the plan moves {needed} {item.asset} base units, the address holds {balance} now"
            )

    def _native(self, item: PlanItem, account: LocalAccount, pending: list[Pending]) -> None:
        for name, kind, to, amount in pending:
            gas = self.chain.estimate(account.address, to, value=1)
            if kind == "refund":
                self.send(
                    self._sent(kind, item, account.address, to, amount, name),
                    account,
                    contract=None,
                    gas=gas,
                    fee=self.chain.fee(),
                )
                continue
            # The sweep: what is left minus its exact gas cost, never more than the plan's sweep.
            fee = self.chain.sweep_fee()
            balance = self.chain.native_balance(account.address)
            if self.dry_run:  # what this dry run did not send still sits in the balance, with its gas
                spent = [s for s in self.sent if s.sender == account.address and s.status == "would send"]
                balance -= sum(s.amount + s.gas_limit * s.max_fee_per_gas for s in spent)
            value = min(amount, balance - gas * fee[0])
            if value <= 0:
                self.echo(f"sweep  {account.address}: nothing left above the gas cost ({balance} wei)")
                continue
            self.send(
                self._sent(kind, item, account.address, to, value, name), account, contract=None, gas=gas, fee=fee
            )

    def _token(
        self, item: PlanItem, account: LocalAccount, gas_account: LocalAccount, pending: list[Pending], gas_top_ups: int
    ) -> None:
        assert item.contract is not None, "a token's item (not item.is_native) names its contract"
        fee = self.chain.fee()
        gases = [
            self.chain.estimate(account.address, item.contract, data=transfer_data(to, amount))
            for _, _, to, amount in pending
        ]
        needed = sum(gases) * fee[0]
        have = self.chain.native_balance(account.address)
        if needed > have:
            name = transfer_name(item.address, item.contract, f"gas:{gas_top_ups + 1}")
            top_up = self._sent("gas", item, gas_account.address, account.address, needed - have, name)
            gas = self.chain.estimate(gas_account.address, account.address, value=1)
            self.send(top_up, gas_account, contract=None, gas=gas, fee=self.chain.fee())
        for (name, kind, to, amount), gas in zip(pending, gases, strict=True):
            self.send(
                self._sent(kind, item, account.address, to, amount, name),
                account,
                contract=item.contract,
                gas=gas,
                fee=fee,
            )

    @property
    def all_mined(self) -> bool:
        done = ("mined", "would send") if self.dry_run else ("mined",)
        return all(sent.status in done for sent in self.sent)
