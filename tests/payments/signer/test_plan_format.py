"""The treasury plan's one format (payments/signer/plan.py): what the server writes is what the signer reads, byte
for byte, and the signer's checks still refuse what they refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from payments.signer.plan import HeldBack, Plan, PlanError, PlanItem, PlanRefund, plan_digest
from tests.servers import ROOT

DEPOSIT = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
TREASURY = "0x8ba1f109551bD432803012645Ac136ddd64DBA72"
CUSTOMER = "0x52908400098527886E0F7030069857D2E4169EE7"
GAS_ACCOUNT = "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0"


def api_answer() -> dict:
    """A plan as `GET /api/v1/treasury/plan/` has always answered it, its keys in that order."""
    return {
        "network": "local",
        "chain_id": 31337,
        "treasury": TREASURY,
        "gas_account": GAS_ACCOUNT,
        "gas_account_path": "m/44'/60'/0'/1/0",
        "gas_account_balance_wei": 10**18,
        "gas_price_wei": 1_000_000_000,
        "gas_estimate_wei": 86_000 * 1_000_000_000,
        "items": [
            {
                "address": DEPOSIT,
                "order": "B2-TOKN-0002",
                "asset": "USDC",
                "contract": TOKEN,
                "balance_base_units": 102_500_000,
                "derivation_path": "m/44'/60'/0'/0/0",
                "refunds": [{"id": 8, "to_address": CUSTOMER, "amount_base_units": 2_500_000}],
                "sweep_base_units": 100_000_000,
            }
        ],
        "held_back": [
            {
                "address": DEPOSIT,
                "order": "B2-NATV-0001",
                "asset": "ETH",
                "contract": None,
                "balance_base_units": 0,
                "owed_base_units": 7,
                "reason": "approved refunds exceed the balance: a reviewer looks at the address first",
            }
        ],
    }


def test_a_plan_read_by_the_signer_writes_back_the_same_bytes():
    raw = api_answer()
    plan = Plan.from_json(raw)
    assert json.dumps(plan.to_json()) == json.dumps(raw)
    assert plan.digest == plan_digest(raw)
    assert plan.items[0].refunds == (PlanRefund(id=8, to_address=CUSTOMER, amount=2_500_000),)


def test_a_plan_made_on_the_server_is_the_plan_the_signer_reads():
    made = Plan(
        network="local",
        chain_id=31337,
        treasury=TREASURY,
        gas_account=GAS_ACCOUNT,
        gas_account_path="m/44'/60'/0'/1/0",
        gas_account_balance_wei=10**18,
        gas_price_wei=1_000_000_000,
        gas_estimate_wei=86_000 * 1_000_000_000,
        items=(
            PlanItem(
                address=DEPOSIT,
                order="B2-TOKN-0002",
                asset="USDC",
                contract=TOKEN,
                balance=102_500_000,
                derivation_path="m/44'/60'/0'/0/0",
                refunds=(PlanRefund(id=8, to_address=CUSTOMER, amount=2_500_000),),
                sweep=100_000_000,
            ),
        ),
        held_back=(
            HeldBack(
                address=DEPOSIT,
                order="B2-NATV-0001",
                asset="ETH",
                contract=None,
                balance=0,
                owed=7,
                reason="approved refunds exceed the balance: a reviewer looks at the address first",
            ),
        ),
    )
    wire = json.dumps(made.to_json())
    assert wire == json.dumps(api_answer())
    read = Plan.from_json(json.loads(wire))
    assert read == made and read.digest == made.digest


def test_a_plan_without_the_servers_figures_is_read_as_before():
    raw = api_answer()
    for figure in ("gas_account_path", "gas_account_balance_wei", "gas_price_wei", "gas_estimate_wei", "held_back"):
        del raw[figure]
    plan = Plan.from_json(raw)
    assert plan.held_back is None and plan.gas_price_wei is None
    assert plan.to_json() == raw and plan.digest == plan_digest(raw)


def _with(change) -> dict:
    raw = api_answer()
    change(raw)
    return raw


def _item(raw: dict) -> dict:
    return raw["items"][0]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda raw: raw.update(chain_id=True), "chain_id"),
        (lambda raw: raw.update(treasury="0x" + "0" * 40), "treasury"),
        (lambda raw: raw.update(treasury=None), "yet the plan sweeps"),
        (lambda raw: raw.update(gas_account="nope"), "gas_account"),
        (lambda raw: _item(raw).update(derivation_path="44'/60'"), "derivation_path"),
        (lambda raw: _item(raw).update(balance_base_units=1.5), "balance_base_units"),
        (lambda raw: _item(raw).update(sweep_base_units="100"), "sweep_base_units"),
        (lambda raw: _item(raw).update(order="B2\nrefund 0x00 1 ETH"), "order reference"),
        (lambda raw: _item(raw)["refunds"][0].update(id=None), "id: missing"),
        (lambda raw: _item(raw)["refunds"][0].update(id=True), "not a refund id"),
        (lambda raw: _item(raw)["refunds"][0].update(amount_base_units=-1), "amount_base_units"),
        (lambda raw: _item(raw)["refunds"][0].update(to_address=CUSTOMER.lower()[:-1]), "to_address"),
        (lambda raw: _item(raw)["refunds"].append(dict(_item(raw)["refunds"][0])), "two refunds share an id"),
        (lambda raw: raw["items"].append(dict(_item(raw))), "share a deposit address and an asset"),
        (lambda raw: raw.update(gas_price_wei=-1), "gas_price_wei"),
        (lambda raw: raw["held_back"][0].update(address="0x1"), "held_back[0].address"),
    ],
)
def test_the_signer_refuses_a_plan_it_cannot_trust(change, refusal):
    with pytest.raises(PlanError, match=re.escape(refusal)):
        Plan.from_json(_with(change))


def test_the_plan_format_needs_no_django():
    # Django made unimportable, as on the treasurer's machine: the format and the signer still import.
    code = (
        "import sys; sys.modules['django'] = None\n"
        "import payments.signer.plan, payments.signer.__main__\n"
        "print(payments.signer.plan.Plan.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Plan"
