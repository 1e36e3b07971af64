"""The signer trusts the treasurer, not the plan: a plan the real server produced, tampered with the way a server
taken over would, is refused (exit 2, every nonce still 0, every balance unchanged) unless it matches the treasurer's
pins (treasury, gas account, chain id), keeps its refunds under the treasurer's cap, and the treasurer said yes to
the refunds it was shown."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

import pytest

from payments.rpc import RpcClient
from payments.treasury import gas_account_address
from tests.payments.signer.chain import run_signer
from tests.payments.verification.helpers import units
from tests.payments.verification.money_out import (
    CUSTOMER_WALLET,
    EXCESS,
    TREASURY,
    balance,
    overpaid,
    refund_approved,
    staff,
)

ATTACKER = "0x000000000000000000000000000000000000dEaD"
GAS_FUNDS = 10**18


@dataclass
class Run:
    plan: dict
    paid: dict  # an order paid exactly: its address is swept
    overpaid: dict  # an order overpaid by EXCESS, refunded to CUSTOMER_WALLET
    url: str
    usdc: str

    def nonces(self) -> list[int]:
        client = RpcClient([self.url])
        senders = [item["address"] for item in self.plan["items"]] + [gas_account_address()]
        return [int(client.call("eth_getTransactionCount", [address, "latest"]), 16) for address in senders]

    def usdc_of(self, address: str) -> int:
        return balance(self.url, self.usdc, address)

    def assert_nothing_sent(self) -> None:
        assert self.nonces() == [0, 0, 0]
        assert self.usdc_of(self.paid["payment"]["address"]) == units(self.paid)
        assert self.usdc_of(self.overpaid["payment"]["address"]) == units(self.overpaid) + EXCESS
        assert self.usdc_of(ATTACKER) == self.usdc_of(TREASURY) == self.usdc_of(CUSTOMER_WALLET) == 0
        assert balance(self.url, None, gas_account_address()) == GAS_FUNDS

    def sign(self, tmp_path, key, *extra: str, answer: str | None = None):
        (tmp_path / "plan.json").write_text(json.dumps(self.plan))
        return run_signer(
            tmp_path / "plan.json", key, self.url, *extra, directory=tmp_path, treasury=TREASURY, answer=answer
        )


@pytest.fixture
def run(treasurers_key, chain, customer, scan_pass, client) -> Run:
    """The plan the server gives the treasurer: one order paid exactly (swept), one overpaid by 2.5 USDC with its
    refund approved to the customer's wallet (refunded, the rest swept); gas in the gas account."""
    reviewer, treasurer = staff("reviewer", "rita"), staff("treasurer", "tom")
    paid = customer.order()
    chain.wallet.pay_token(chain.usdc, paid["payment"]["address"], units(paid))
    placed, refund = overpaid(chain, customer, scan_pass)
    scan_pass()
    refund_approved(client, placed, refund, reviewer)
    chain.wallet.pay_native(gas_account_address(), GAS_FUNDS)
    plan = client.get("/api/v1/treasury/plan/?network=local", headers={"Authorization": f"Token {treasurer}"})
    assert plan.status_code == 200, plan.content
    assert len(plan.json()["items"]) == 2
    return Run(plan=plan.json(), paid=paid, overpaid=placed, url=chain.node.url, usdc=chain.usdc)


def usdc(base_units: int) -> str:
    """USDC base units as the signer shows them: whole USDC, no trailing zeros."""
    return f"{Decimal(base_units).scaleb(-6).normalize():f}"


def item_of(run: Run, placed: dict) -> dict:
    (item,) = [item for item in run.plan["items"] if item["address"] == placed["payment"]["address"]]
    return item


def steal_the_paid_address(run: Run) -> None:
    """The server's attack without touching the treasury: a refund nobody approved, of all the paid order's USDC."""
    item = item_of(run, run.paid)
    item["refunds"].append({"id": 999, "to_address": ATTACKER, "amount_base_units": item["balance_base_units"]})
    item["sweep_base_units"] = 0


def test_a_plan_whose_treasury_is_an_attackers_is_refused_and_nothing_is_sent(run, treasurers_key, tmp_path):
    run.plan["treasury"] = ATTACKER
    done = run.sign(tmp_path, treasurers_key)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the plan's treasury {ATTACKER} is not the pinned {TREASURY}" in done.stderr
    run.assert_nothing_sent()


@pytest.mark.parametrize("answer", ["n\n", ""], ids=["no", "no answer"])
def test_an_unapproved_refund_is_shown_and_nothing_is_sent_unless_the_treasurer_says_yes(
    run, treasurers_key, tmp_path, answer
):
    steal_the_paid_address(run)
    done = run.sign(tmp_path, treasurers_key, "--max-refunds-usd", "5000", answer=answer)
    assert done.returncode == 2, done.stdout + done.stderr
    # The treasurer saw both refunds (destination, amount in USDC, order) before being asked
    assert f"{ATTACKER} {usdc(units(run.paid))} USDC order {run.paid['reference']}" in done.stdout
    assert f"{CUSTOMER_WALLET} 2.5 USDC order {run.overpaid['reference']}" in done.stdout
    assert "Send these 2 refunds? [y/N]" in done.stdout
    assert "not confirmed: nothing sent" in done.stderr
    run.assert_nothing_sent()


def test_refunds_above_the_treasurers_cap_are_refused_even_with_yes(run, treasurers_key, tmp_path):
    steal_the_paid_address(run)
    done = run.sign(tmp_path, treasurers_key, "--max-refunds-usd", "100")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{ATTACKER} {usdc(units(run.paid))} USDC order {run.paid['reference']}" in done.stdout  # shown, refused
    assert f"the refunds total {usdc(units(run.paid) + EXCESS)} USD, above the cap of 100 USD" in done.stderr
    run.assert_nothing_sent()


@pytest.mark.parametrize(
    ("tamper", "pins", "refusal"),
    [
        ("gas_account", (), "is not the mnemonic's"),
        (None, ("--gas-account", ATTACKER), "is not the pinned gas account"),
        ("chain_id", ("--chain-id", "31337"), "the plan is for chain 1, the pinned chain is 31337"),
        (None, ("--chain-id", "1"), "the plan is for chain 31337, the pinned chain is 1"),
    ],
    ids=["plan's gas account", "pinned gas account", "plan's chain", "pinned chain"],
)
def test_a_plan_that_differs_from_the_gas_account_or_chain_pinned_is_refused(
    run, treasurers_key, tmp_path, tamper, pins, refusal
):
    if tamper == "gas_account":
        run.plan["gas_account"] = ATTACKER
    elif tamper == "chain_id":
        run.plan["chain_id"] = 1
    done = run.sign(tmp_path, treasurers_key, *pins)
    assert done.returncode == 2, done.stdout + done.stderr
    assert refusal in done.stderr
    run.assert_nothing_sent()


def test_with_yes_a_plan_that_matches_every_pin_is_paid(run, treasurers_key, tmp_path):
    pins = ("--gas-account", gas_account_address(), "--chain-id", "31337", "--max-refunds-usd", "2.5")
    done = run.sign(tmp_path, treasurers_key, *pins)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{CUSTOMER_WALLET} 2.5 USDC order {run.overpaid['reference']}" in done.stdout
    assert "Send these" not in done.stdout  # --yes: shown, not asked
    assert run.usdc_of(CUSTOMER_WALLET) == EXCESS
    assert run.usdc_of(TREASURY) == units(run.paid) + units(run.overpaid)
    assert run.usdc_of(run.paid["payment"]["address"]) == run.usdc_of(run.overpaid["payment"]["address"]) == 0


def test_the_treasurer_who_answers_yes_pays_the_refunds_shown(run, treasurers_key, tmp_path):
    done = run.sign(tmp_path, treasurers_key, answer="y\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Send these 1 refunds? [y/N]" in done.stdout
    assert run.usdc_of(CUSTOMER_WALLET) == EXCESS
    assert run.usdc_of(TREASURY) == units(run.paid) + units(run.overpaid)
