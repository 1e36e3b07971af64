"""The signer (`python -m payments.signer`) against a real anvil and a real ERC-20 token, run as a subprocess.

A native deposit (3 ETH: 1 refunded, the rest swept) and a token deposit (100 USDC: 30 refunded, 70 swept, its
gas topped up from the gas account). Attacks and faults first: nothing may be sent, or nothing paid twice.
"""

from __future__ import annotations

import fcntl
import functools
import json
import shutil
import sys

import pytest
from eth_account import Account

from tests.payments.signer.chain import (
    ETH,
    GAS_PATH,
    MNEMONIC,
    OTHER_MNEMONIC,
    Chain,
    deposit_path,
    derived,
    mnemonic_file,
    run_signer,
)
from tests.payments.signer.dropping_rpc import DroppingRpc
from tests.servers import ROOT, Anvil

NATIVE_DEPOSIT, TOKEN_DEPOSIT = 3 * ETH, 100_000_000
NATIVE_REFUND, TOKEN_REFUND = 1 * ETH, 30_000_000
GAS_FUNDS = ETH


@pytest.fixture
def chain():
    node = Anvil()
    try:
        yield Chain(node)
    finally:
        node.stop()


@pytest.fixture
def people():
    """Fresh addresses for the treasury and the two customers owed a refund."""
    return {name: Account.create().address for name in ("treasury", "native_refund", "token_refund")}


@pytest.fixture
def plan(chain, people):
    """A plan as the server returns it, for two funded deposit addresses of the test mnemonic."""
    native, token = derived(deposit_path(0)), derived(deposit_path(1))
    chain.fund(native, NATIVE_DEPOSIT)
    chain.mint(token, TOKEN_DEPOSIT)
    chain.fund(derived(GAS_PATH), GAS_FUNDS)
    return {
        "network": "local",
        "chain_id": 31337,
        "treasury": people["treasury"],
        "gas_account": derived(GAS_PATH),
        "items": [
            {
                "address": native,
                "derivation_path": deposit_path(0),
                "order": "B2-NATV-0001",
                "asset": "ETH",
                "contract": None,
                "balance_base_units": NATIVE_DEPOSIT,
                "refunds": [{"id": 7, "to_address": people["native_refund"], "amount_base_units": NATIVE_REFUND}],
                "sweep_base_units": NATIVE_DEPOSIT - NATIVE_REFUND,
            },
            {
                "address": token,
                "derivation_path": deposit_path(1),
                "order": "B2-TOKN-0002",
                "asset": "USDC",
                "contract": chain.token,
                "balance_base_units": TOKEN_DEPOSIT,
                "refunds": [{"id": 8, "to_address": people["token_refund"], "amount_base_units": TOKEN_REFUND}],
                "sweep_base_units": TOKEN_DEPOSIT - TOKEN_REFUND,
            },
        ],
    }


@pytest.fixture
def sign(chain, people, tmp_path):
    """The treasurer's run of a plan: the test's mnemonic, pinned to the test's treasury, its state in the test's
    folder; `rpc_url` for a proxy in front of the chain."""

    def run(plan, *extra: str, rpc_url: str | None = None):
        return run_signer(
            plan,
            mnemonic_file(tmp_path),
            rpc_url or chain.node.url,
            *extra,
            directory=tmp_path,
            treasury=people["treasury"],
        )

    return run


def senders(plan) -> list[str]:
    return [item["address"] for item in plan["items"]] + [derived(GAS_PATH)]


def assert_nothing_sent(chain, plan, people) -> None:
    assert [chain.nonce(address) for address in senders(plan)] == [0, 0, 0]
    native, token = (item["address"] for item in plan["items"])
    assert (chain.eth(native), chain.tokens(token), chain.eth(derived(GAS_PATH))) == (
        NATIVE_DEPOSIT,
        TOKEN_DEPOSIT,
        GAS_FUNDS,
    )
    assert all(chain.eth(address) == 0 and chain.tokens(address) == 0 for address in people.values())


def assert_paid_once(chain, plan, people, sent: list[dict]) -> None:
    """Exact balances everywhere, every transaction mined from the right account, each transfer once."""
    native, token = (item["address"] for item in plan["items"])
    gas_account = derived(GAS_PATH)
    by_kind = {(entry["sender"], entry["kind"]): entry for entry in sent}
    assert sorted(by_kind) == sorted(
        [(native, "refund"), (native, "sweep"), (gas_account, "gas"), (token, "refund"), (token, "sweep")]
    )
    for entry in sent:
        receipt, transaction = chain.receipt(entry["tx_hash"]), chain.transaction(entry["tx_hash"])
        assert int(receipt["status"], 16) == 1
        assert transaction["from"].lower() == entry["sender"].lower()
        assert int(receipt["gasUsed"], 16) == entry["gas_used"]
    # One transaction per transfer: the nonces count them.
    assert [chain.nonce(address) for address in senders(plan)] == [2, 2, 1]
    # The native deposit: the refund, then everything left above the sweep's gas; it ends at exactly 0.
    native_fees = by_kind[native, "refund"]["fee_paid"] + by_kind[native, "sweep"]["fee_paid"]
    assert chain.eth(people["native_refund"]) == NATIVE_REFUND
    assert (
        chain.eth(people["treasury"])
        == by_kind[native, "sweep"]["amount"]
        == NATIVE_DEPOSIT - NATIVE_REFUND - native_fees
    )
    assert chain.eth(native) == 0
    # The token deposit: the refund and the sweep exactly; its gas came from the gas account, what the fee cap
    # reserved above the price paid stays there as dust.
    top_up = by_kind[gas_account, "gas"]
    token_fees = by_kind[token, "refund"]["fee_paid"] + by_kind[token, "sweep"]["fee_paid"]
    assert chain.tokens(people["token_refund"]) == TOKEN_REFUND
    assert chain.tokens(people["treasury"]) == TOKEN_DEPOSIT - TOKEN_REFUND
    assert chain.tokens(token) == 0
    assert chain.eth(token) == top_up["amount"] - token_fees
    # Enough for both transfers at the fee cap they were signed with (a rerun may sign them at a lower one).
    assert top_up["amount"] >= sum(
        by_kind[token, kind]["gas_limit"] * by_kind[token, kind]["max_fee_per_gas"] for kind in ("refund", "sweep")
    )
    assert chain.eth(gas_account) == GAS_FUNDS - top_up["amount"] - top_up["fee_paid"]


# Attacks: the plan is refused before anything is sent.


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o602, 0o660])
def test_a_mnemonic_file_others_can_read_or_write_is_refused(chain, plan, people, tmp_path, mode):
    done = run_signer(
        plan, mnemonic_file(tmp_path, mode=mode), chain.node.url, directory=tmp_path, treasury=people["treasury"]
    )
    assert done.returncode == 2, done.stderr
    assert "open to group or others" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_a_mnemonic_file_behind_a_symlink_is_refused(chain, plan, people, tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(mnemonic_file(tmp_path))
    done = run_signer(plan, link, chain.node.url, directory=tmp_path, treasury=people["treasury"])
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_an_address_of_another_mnemonic_refuses_the_whole_plan(sign, chain, plan, people, tmp_path):
    stranger = derived(deposit_path(42), OTHER_MNEMONIC)  # anvil's mnemonic, past the accounts it funds
    chain.fund(stranger, ETH)
    plan["items"].append({**plan["items"][0], "address": stranger, "derivation_path": deposit_path(2)})
    done = sign(plan)
    assert done.returncode == 2, done.stderr
    assert "does not derive from this mnemonic" in done.stderr
    assert [chain.nonce(address) for address in senders(plan)] == [0, 0, 0, 0]
    assert chain.eth(stranger) == ETH and chain.eth(people["native_refund"]) == 0


def test_a_wrong_derivation_path_refuses_the_whole_plan(sign, chain, plan, people, tmp_path):
    plan["items"][1]["derivation_path"] = deposit_path(5)  # the token deposit is /1
    done = sign(plan)
    assert done.returncode == 2, done.stderr
    assert "does not derive from this mnemonic at m/44'/60'/0'/0/5" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_a_gas_account_that_is_not_the_mnemonics_is_refused(sign, chain, plan, people, tmp_path):
    plan["gas_account"] = derived(GAS_PATH, OTHER_MNEMONIC)
    done = sign(plan)
    assert done.returncode == 2, done.stderr
    assert_nothing_sent(chain, plan, people)


def test_a_plan_for_another_chain_is_refused(sign, chain, plan, people, tmp_path):
    plan["chain_id"] = 1  # Ethereum's plan, replayed on this chain
    done = sign(plan)
    assert done.returncode == 2, done.stderr
    assert "chain id is 31337, the plan is for 1" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_refunds_in_the_coin_above_the_treasurers_cap_are_refused(sign, chain, plan, people, tmp_path):
    done = sign(plan, "--max-refunds-native", "0.5")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"refund {people['native_refund']} 1 ETH order B2-NATV-0001" in done.stdout
    assert "the refunds in the chain's coin total 1, above the cap of 0.5 (--max-refunds-native)" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_the_pins_may_come_from_a_config_file_only_the_treasurer_may_write(sign, chain, plan, people, tmp_path):
    config = tmp_path / "signer.toml"
    sign = functools.partial(run_signer, plan, mnemonic_file(tmp_path), chain.node.url, "--config", str(config))
    # A file others may write: whoever can write it chooses where the sweeps go
    config.write_text(f'treasury = "{people["treasury"]}"\nmax_refunds_usd = 1000\nmax_refunds_native = "10"\n')
    config.chmod(0o664)
    done = sign(directory=tmp_path, treasury=None)
    assert done.returncode == 2 and "writable by group or others (mode 664)" in done.stderr, done.stderr
    # The treasurer's own file: its caps and pins apply (30 USDC to refund, a cap of 10)
    config.chmod(0o600)
    config.write_text(f'treasury = "{people["treasury"]}"\nchain_id = 31337\nmax_refunds_usd = 10\n')
    done = sign("--yes", directory=tmp_path, treasury=None)
    assert done.returncode == 2 and "the refunds total 30 USD, above the cap of 10 USD" in done.stderr, done.stderr
    config.write_text(f'treasury = "{people["token_refund"]}"\nmax_refunds_usd = 1000\nmax_refunds_native = 10\n')
    done = sign("--yes", directory=tmp_path, treasury=None)
    assert done.returncode == 2 and f"is not the pinned {people['token_refund']}" in done.stderr, done.stderr
    # No treasury pinned at all: refused, never the plan's
    config.write_text("max_refunds_usd = 1000\n")
    done = sign("--yes", directory=tmp_path, treasury=None)
    assert done.returncode == 2 and "--treasury: required" in done.stderr, done.stderr
    assert_nothing_sent(chain, plan, people)


# A "token" that burns about 520,000 gas on any call, then answers a huge number (a balance, a success).
GAS_GUZZLER = "0x614e205b6001900380600357" + "7f" + "ff" * 32 + "60005260206000f3"


def test_a_token_whose_transfer_burns_gas_gets_no_top_up_from_the_gas_account(sign, chain, plan, people, tmp_path):
    """A server taken over cannot burn the gas account in fees: it names a contract of its own as an item's token,
    whose transfer costs far more gas than a token's; the top-up for it would be spent on nothing."""
    guzzler = Account.create().address
    chain.node.call("anvil_setCode", [guzzler, GAS_GUZZLER])
    deposit = derived(deposit_path(2))
    plan["items"] = [
        {
            "address": deposit,
            "derivation_path": deposit_path(2),
            "asset": "USDC",
            "contract": guzzler,
            "balance_base_units": 1,
            "refunds": [],
            "sweep_base_units": 1,
        }
    ]
    done = sign(plan)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "above the 200000 gas a token transfer may cost" in done.stderr
    assert chain.nonce(derived(GAS_PATH)) == 0 and chain.eth(derived(GAS_PATH)) == GAS_FUNDS
    assert chain.eth(deposit) == 0


def test_a_plan_that_moves_more_than_the_address_holds_skips_that_item(sign, chain, plan, people, tmp_path):
    plan["items"][1]["sweep_base_units"] = TOKEN_DEPOSIT  # refund + sweep = 130 USDC, the address holds 100
    done = sign(plan)
    assert done.returncode == 1, done.stderr
    assert "the address holds 100000000 now" in done.stderr
    token = plan["items"][1]["address"]
    assert chain.nonce(token) == 0 and chain.nonce(derived(GAS_PATH)) == 0 and chain.tokens(token) == TOKEN_DEPOSIT
    assert chain.eth(people["native_refund"]) == NATIVE_REFUND  # the other item is paid


def test_a_journal_of_another_plan_is_refused(sign, chain, plan, people, tmp_path):
    out = tmp_path / "sent.json"
    (tmp_path / "sent.json.journal").write_text(json.dumps({"plan": "0" * 64, "transfers": {}}))
    done = sign(plan, "--json", str(out))
    assert done.returncode == 2, done.stderr
    assert "belongs to another plan" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_a_second_signer_on_the_same_journal_is_refused(sign, chain, plan, people, tmp_path):
    out = tmp_path / "sent.json"
    with open(tmp_path / "sent.json.journal.lock", "a") as held:  # a first signer, still running
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        done = sign(plan, "--json", str(out))
    assert done.returncode == 2, done.stderr
    assert "another signer is running" in done.stderr
    assert_nothing_sent(chain, plan, people)


def test_a_refund_the_recipient_refuses_skips_that_item(sign, chain, plan, people, tmp_path):
    plan["items"][0]["refunds"][0]["to_address"] = chain.token  # a contract without a payable fallback
    done = sign(plan)
    assert done.returncode == 1, done.stderr
    assert "would fail" in done.stderr
    native, token = (item["address"] for item in plan["items"])
    assert chain.nonce(native) == 0 and chain.eth(native) == NATIVE_DEPOSIT
    assert chain.tokens(people["token_refund"]) == TOKEN_REFUND  # the other item is paid


def test_a_reverted_transfer_fails_the_run_and_stops_its_item(sign, chain, plan, people, tmp_path):
    refund_to = plan["items"][0]["refunds"][0]["to_address"]

    def recipient_starts_refusing(number: int) -> None:
        if number == 1:  # between the signer's estimate and its refund: code that always reverts
            chain.node.call("anvil_setCode", [refund_to, "0x60006000fd"])

    rpc = DroppingRpc(chain.node.url, before_send=recipient_starts_refusing)
    out = tmp_path / "sent.json"
    done = sign(plan, "--json", str(out), rpc_url=rpc.url)
    rpc.stop()
    assert done.returncode == 1, done.stdout + done.stderr
    sent = json.loads(out.read_text())
    assert sent[0]["kind"] == "refund" and sent[0]["status"] == "reverted"
    assert int(chain.receipt(sent[0]["tx_hash"])["status"], 16) == 0
    native = plan["items"][0]["address"]
    assert chain.nonce(native) == 1  # the sweep behind the failed refund was not sent
    assert chain.eth(native) == NATIVE_DEPOSIT - sent[0]["fee_paid"] and chain.eth(refund_to) == 0
    assert chain.tokens(people["treasury"]) == TOKEN_DEPOSIT - TOKEN_REFUND  # the token item is paid


def test_a_dry_run_sends_nothing_and_prints_the_gas_total(sign, chain, plan, people, tmp_path):
    done = sign(plan, "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum("would send" in line for line in lines) == 5  # 2 native, the gas top-up, 2 token transfers
    assert lines[-1].startswith("dry run: 5 transactions, at most ") and lines[-1].endswith("wei of gas; nothing sent")
    assert int(lines[-1].split("at most ")[1].split()[0]) > 0
    assert_nothing_sent(chain, plan, people)
    assert not list(tmp_path.glob("*.journal"))


# The whole plan, and a rerun after an RPC that drops mid-run.


def test_the_signer_pays_the_refunds_then_sweeps_to_the_treasury(sign, chain, plan, people, tmp_path):
    out = tmp_path / "sent.json"
    done = sign(plan, "--json", str(out))
    assert done.returncode == 0, done.stderr
    sent = json.loads(out.read_text())
    assert [entry["kind"] for entry in sent] == ["refund", "sweep", "gas", "refund", "sweep"]
    assert all(entry["tx_hash"] in done.stdout for entry in sent)
    assert_paid_once(chain, plan, people, sent)
    top_up, token_transfers = sent[2], sent[3:]
    assert top_up["amount"] == sum(entry["gas_limit"] * entry["max_fee_per_gas"] for entry in token_transfers)
    by_sender = {}
    for entry in sent:
        by_sender.setdefault(entry["sender"], []).append(entry)
    native, token = (item["address"] for item in plan["items"])
    native_gas = sum(entry["gas_used"] for entry in by_sender[native])
    token_gas = sum(entry["gas_used"] for entry in by_sender[token]) + by_sender[derived(GAS_PATH)][0]["gas_used"]
    print(
        f"\ngas per swept address: native {native_gas} (refund + sweep; the sweep alone "
        f"{by_sender[native][1]['gas_used']}), token {token_gas} (gas top-up + refund + sweep; the sweep alone "
        f"{by_sender[token][1]['gas_used']})"
    )
    # A rerun of the same command finds every transfer in the journal: nothing is sent again.
    again = sign(plan, "--json", str(out))
    assert again.returncode == 0, again.stderr
    assert_paid_once(chain, plan, people, json.loads(out.read_text()))


@pytest.mark.parametrize("sends_before_drop", [1, 2, 3, 4, 5])
def test_an_rpc_that_drops_mid_run_then_a_rerun_pays_nothing_twice(
    sign, chain, plan, people, tmp_path, sends_before_drop
):
    rpc = DroppingRpc(chain.node.url, sends_before_drop=sends_before_drop)
    out = tmp_path / "sent.json"
    dropped = sign(plan, "--json", str(out), rpc_url=rpc.url)
    assert dropped.returncode == 1, dropped.stdout + dropped.stderr
    assert "rerun the same command" in dropped.stderr
    # A dry run now reads the journal: it shows what the first run sent as mined and would send only the rest.
    nonces = [chain.nonce(address) for address in senders(plan)]
    dry = sign(plan, "--json", str(out), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.count("would send") == 5 - sends_before_drop
    assert dry.stdout.count("mined (journal)") == sends_before_drop
    assert f"dry run: {5 - sends_before_drop} transactions" in dry.stdout
    assert [chain.nonce(address) for address in senders(plan)] == nonces
    rerun = sign(plan, "--json", str(out))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert_paid_once(chain, plan, people, json.loads(out.read_text()))
    assert "(journal)" in rerun.stdout  # what the first run sent is reported from its journal, not sent again


def test_a_lost_journal_cannot_pay_twice(sign, chain, plan, people, tmp_path):
    out = tmp_path / "sent.json"
    first = sign(plan, "--json", str(out))
    assert first.returncode == 0, first.stderr
    sent = json.loads(out.read_text())
    (tmp_path / "sent.json.journal").unlink()
    again = sign(plan)
    assert again.returncode == 1
    assert again.stdout.count("sent by an earlier plan: not sent again") == 2  # the refunds: the refund register
    assert again.stderr.count("the address holds 0 now") == 1  # the token sweep: the balance check
    assert_paid_once(chain, plan, people, sent)
    # The refund register lost too: the balance check alone stops both items
    shutil.rmtree(tmp_path / "state")
    third = sign(plan)
    assert third.returncode == 1
    assert third.stderr.count("the address holds") == 2  # both items: their balance is below the plan's sum now
    assert_paid_once(chain, plan, people, sent)


def test_a_refund_a_later_plan_names_again_is_not_paid_again_from_the_money_left(sign, chain, plan, people, tmp_path):
    """The shop has not recorded the first payment of refund 7 yet, so its next plan (another digest, another
    folder, hence another journal) names it again, and the address holds enough to pay it twice."""
    first = sign(plan, "--json", str(tmp_path / "a.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    native = plan["items"][0]["address"]
    chain.fund(native, NATIVE_DEPOSIT)  # more money on the address since
    later = {**plan, "items": [{**plan["items"][0], "balance_base_units": NATIVE_DEPOSIT, "sweep_base_units": 0}]}
    (tmp_path / "later").mkdir()
    again = sign(later, "--json", str(tmp_path / "later" / "b.json"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "refund" in again.stdout and "sent by an earlier plan: not sent again" in again.stdout
    assert chain.eth(people["native_refund"]) == NATIVE_REFUND  # once
    assert chain.nonce(native) == 2  # the first plan's refund and sweep, nothing since


def test_the_signer_imports_no_django_and_nothing_of_the_shop(tmp_path):
    import subprocess
    import sys

    from tests.servers import ROOT

    probe = (
        "import sys, payments.signer.__main__\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rest_framework', 'celery', 'shop', 'provisioning', 'config'} "
        "or (m.startswith('payments.') and not m.startswith('payments.signer')))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_an_address_holding_a_token_and_the_coin_sweeps_the_coin_first(sign, chain, plan, people, tmp_path):
    """One deposit address with 100 USDC and 0.5 ETH (a coin payment to a token order): two items. Listed token
    first, the coin still goes first, so the token transfers' gas comes from the gas account, not the coin."""
    token_item = plan["items"][1]
    address, coin = token_item["address"], ETH // 2
    chain.fund(address, coin)
    refund = {"id": 9, "to_address": people["token_refund"], "amount_base_units": coin // 5}
    plan["items"].append(
        {
            **token_item,
            "asset": "ETH",
            "contract": None,
            "balance_base_units": coin,
            "refunds": [refund],
            "sweep_base_units": coin - coin // 5,
        }
    )
    out = tmp_path / "sent.json"
    done = sign(plan, "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    sent = json.loads(out.read_text())
    from_address = [(entry["kind"], entry["asset"]) for entry in sent if entry["sender"] == address]
    assert from_address == [("refund", "ETH"), ("sweep", "ETH"), ("refund", "USDC"), ("sweep", "USDC")]
    coin_fees = sum(entry["fee_paid"] for entry in sent if entry["sender"] == address and entry["asset"] == "ETH")
    coin_sweep = next(e for e in sent if e["sender"] == address and e["kind"] == "sweep" and e["asset"] == "ETH")
    assert coin_sweep["amount"] == coin - coin // 5 - coin_fees
    assert chain.eth(people["token_refund"]) == coin // 5
    native_sweep = next(e for e in sent if e["sender"] == plan["items"][0]["address"] and e["kind"] == "sweep")
    assert chain.eth(people["treasury"]) == native_sweep["amount"] + coin_sweep["amount"]
    top_up = next(entry for entry in sent if entry["kind"] == "gas")
    token_fees = sum(entry["fee_paid"] for entry in sent if entry["sender"] == address and entry["asset"] == "USDC")
    assert top_up["amount"] == sum(
        e["gas_limit"] * e["max_fee_per_gas"] for e in sent if e["sender"] == address and e["asset"] == "USDC"
    )
    assert chain.eth(address) == top_up["amount"] - token_fees
    assert chain.tokens(people["treasury"]) == TOKEN_DEPOSIT - TOKEN_REFUND and chain.tokens(address) == 0


def test_the_treasurer_gets_the_servers_xpub_and_gas_account_from_the_mnemonic_file(tmp_path):
    import subprocess

    from payments.addresses import derive_address, gas_account_address

    words = tmp_path / "mnemonic.txt"
    words.write_text(MNEMONIC + "\n")
    words.chmod(0o644)
    refused = subprocess.run(
        [sys.executable, "-m", "payments.signer.xpub", "--mnemonic-file", str(words)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "chmod 600" in refused.stderr and "xpub" not in refused.stdout
    words.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "payments.signer.xpub", "--mnemonic-file", str(words)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    xpub = done.stdout.splitlines()[0].removeprefix("PAYMENTS_XPUB=")
    # What the server derives from that xpub is what the signer derives from the mnemonic
    assert derive_address(3, xpub) == derived(deposit_path(3))
    assert gas_account_address(xpub) == derived(GAS_PATH) and derived(GAS_PATH) in done.stdout
