"""Only coin that really moved pays an order: every way a contract moves the native coin, and the reverted
variants of each, through the "I have paid" fast path (the tx hash's trace) and the scan's trace search.

The attack: a `try/catch` around an inner call that sends the coin to the deposit address and then reverts.
The transaction succeeds and the trace shows a value-carrying CALL into the address that did not fail
itself, but its parent frame reverted: nothing arrived. Before the fix the order was paid with 0 wei on
its address.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_abi import encode

from payments.addresses import derive_address, key_fingerprint
from payments.models import AddressCursor, Credit, Network
from payments.verify import transfers_in_tx
from tests.payments.verification.chain import call_data
from tests.payments.verification.helpers import payment_of, units

# Every RPC read goes through a provider with tight limits (small log ranges and batches, 429s): issue 26.
pytestmark = pytest.mark.usefixtures("tight_provider")

CONTRACTS = Path(__file__).parent / "contracts"
DEPLOY_GAS = 3_000_000
SALT = (7).to_bytes(32, "big")


def artifact(name: str) -> dict:
    return json.loads((CONTRACTS / f"{name}.json").read_text())


@pytest.fixture
def mover(chain) -> str:
    """The attacker's (or a smart wallet's) contract, deployed on the test chain."""
    return chain.wallet.send(to=None, data=artifact("CoinMover")["bytecode"], gas=DEPLOY_GAS).contract


def through_mover(signature: str, *extra):
    types = signature[signature.index("(") + 1 : -1].split(",")

    def send(chain, mover: str, to: str, wei: int, must_succeed: bool = True):
        data = call_data(signature, types, [to, *extra])
        return chain.wallet.send(to=mover, data=data, value=wei, gas=DEPLOY_GAS, must_succeed=must_succeed)

    return send


def deployment_paying(chain, mover: str, to: str, wei: int, must_succeed: bool = True):
    """A contract creation transaction carrying coin, whose constructor sends it on: a top-level CREATE."""
    data = artifact("PayOnCreate")["bytecode"] + encode(["address"], [to]).hex()
    return chain.wallet.send(to=None, data=data, value=wei, gas=DEPLOY_GAS, must_succeed=must_succeed)


PAYING = {
    "a CALL from a contract": through_mover("forward(address)"),
    "nested CALLs": through_mover("forwardNested(address)"),
    "a CREATE with value": through_mover("createPaying(address)"),
    "a CREATE2 with value": through_mover("create2Paying(address,bytes32)", SALT),
    "a SELFDESTRUCT": through_mover("selfdestructPaying(address)"),
    "a contract deployment carrying value": deployment_paying,
}
UNDONE = {
    "a CALL in a reverted frame whose revert was caught": through_mover("tryAndCatch(address,uint8)", 0),
    "nested CALLs under a reverted grandparent": through_mover("tryAndCatch(address,uint8)", 1),
    "a CREATE in a reverted frame": through_mover("tryAndCatch(address,uint8)", 2),
    "a CREATE2 in a reverted frame": through_mover("tryAndCatch(address,uint8)", 3),
    "a SELFDESTRUCT in a reverted frame": through_mover("tryAndCatch(address,uint8)", 4),
    "a CALL in a transaction that reverted": through_mover("forwardThenRevert(address)"),
    "a DELEGATECALL (the coin stays with the caller)": through_mover("delegateTo(address)"),
    "a STATICCALL": through_mover("staticTo(address)"),
}


def balance(chain, address: str) -> int:
    return int(chain.node.call("eth_getBalance", [address, "latest"]), 16)


def fast_path(placed: dict, tx_hash: str) -> int:
    """What the "I have paid" check of this tx hash finds for the order's address, in wei."""
    payment = payment_of(placed)
    transfers, _found = transfers_in_tx(network=Network.objects.get(slug="local"), payment=payment, tx_hash=tx_hash)
    return sum(transfer.amount for transfer in transfers)


@pytest.mark.parametrize("how", PAYING)
@pytest.mark.parametrize("path", ["I have paid", "scan"])
def test_coin_a_contract_really_moved_to_the_address_pays_the_order(chain, customer, scan_pass, mover, how, path):
    # Given an order in ETH
    placed = customer.order(asset="ETH")
    address, wei = placed["payment"]["address"], units(placed)

    # When the quoted wei reaches the deposit address through a contract, in this way
    sent = PAYING[how](chain, mover, address, wei)
    chain.mine(1)
    assert balance(chain, address) == wei

    # Then the fast path finds exactly that amount in the transaction, and the scan alone pays the order
    if path == "I have paid":
        assert fast_path(placed, sent.tx_hash) == wei
        return
    scan_pass()
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(wei)
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]


@pytest.mark.parametrize("how", UNDONE)
@pytest.mark.parametrize("path", ["I have paid", "scan"])
def test_coin_that_never_arrived_is_never_credited(chain, customer, scan_pass, mover, how, path):
    # Given an order in ETH
    placed = customer.order(asset="ETH")
    address, wei = placed["payment"]["address"], units(placed)

    # When an attacker's transaction shows a value-carrying frame into the deposit address that was undone
    sent = UNDONE[how](chain, mover, address, wei, must_succeed=False)
    chain.mine(2)
    assert balance(chain, address) == 0

    # Then neither the "I have paid" check of its hash nor the scan credits anything: the order is not paid
    if path == "I have paid":
        assert fast_path(placed, sent.tx_hash) == 0
        customer.paid(placed, sent.tx_hash)
    scan_pass()
    seen = customer.read(placed)
    assert seen["payment"]["status"] == "pending"
    assert (seen["payment"]["received_base_units"], seen["payment"]["tx_hashes"]) == ("0", [])
    assert seen["status"] in ("awaiting_payment", "payment_reported")
    assert not Credit.objects.exists()


@pytest.fixture
def lying_tracer(tight_provider):
    """The local network's only provider, tightly limited, whose call traces double every value they show."""
    tight_provider.trace_value_factor = 2
    return tight_provider


@pytest.mark.parametrize("path", ["I have paid", "scan"])
def test_a_trace_never_credits_more_than_the_address_balance_gained(
    chain, customer, scan_pass, mover, lying_tracer, path
):
    # Given an order in ETH, and a provider whose tracer doubles what it shows
    placed = customer.order(asset="ETH")
    address, wei = placed["payment"]["address"], units(placed)

    # When only half the quote is forwarded by a contract (the trace claims the full amount)
    sent = PAYING["a CALL from a contract"](chain, mover, address, wei // 2)
    chain.mine(1)
    if path == "I have paid":
        customer.paid(placed, sent.tx_hash)
    scan_pass()

    # Then what is credited is what the balance really gained in that block: half, underpaid, not paid
    assert [int(c.amount_base_units) for c in Credit.objects.all()] == [wei // 2]
    seen = customer.read(placed)
    assert (seen["payment"]["status"], seen["payment"]["received_base_units"]) == ("underpaid", str(wei // 2))
    assert seen["status"] == "needs_review"


def test_coin_already_on_the_address_does_not_hide_a_forwarded_payment(chain, customer, scan_pass, mover):
    # Given coin sent to the address the next order will get, before that order exists (dust, or an
    # earlier payment on this address)
    cursor = AddressCursor.objects.filter(key_fingerprint=key_fingerprint()).first()
    address = derive_address(cursor.next_index if cursor else 0)
    chain.wallet.pay_native(address, 12345)
    chain.mine(3)
    placed = customer.order(asset="ETH")
    assert placed["payment"]["address"] == address

    # When the full quote is forwarded by a contract, and only the scan looks (no "I have paid")
    sent = PAYING["a CALL from a contract"](chain, mover, address, units(placed))
    chain.mine(1)
    scan_pass()

    # Then the forwarded payment is found and pays the order; the coin from before does not count
    seen = customer.read(placed)
    assert (seen["status"], seen["payment"]["status"]) == ("paid", "confirmed")
    assert seen["payment"]["received_base_units"] == str(units(placed))
    assert seen["payment"]["tx_hashes"] == [sent.tx_hash.lower()]
    assert int(payment_of(placed).opening_balance_base_units) == 12345
