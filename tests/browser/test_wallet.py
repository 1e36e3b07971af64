"""Paying from a wallet in the browser (Chromium): "Pay with wallet" on the order page, against a wallet of our own.

The wallet is injected before the page's scripts (`add_init_script`) as an EIP-1193 provider that also announces
itself through EIP-6963; its `request` is answered by `BrowserWallet` below, in this process, which keeps a key
anvil funded, signs the transactions the page asks for with eth_account and sends them raw to the session's
anvil. So what reaches the chain is exactly what the page prepared. The button must stay hidden without a wallet
and without JavaScript, and the hash the wallet answers must take the "I have paid" path.
"""

from __future__ import annotations

import base64
import json
import uuid
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import translation
from django.utils.translation import gettext
from eth_abi import encode
from eth_account import Account
from eth_utils import function_signature_to_4byte_selector, to_checksum_address

from tests.browser.checks import VIEWPORT, nu_clean
from tests.browser.conftest import order_placed

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

LOCAL_CHAIN_ID = 31337
ICON_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><circle cx="12" cy="12" r="10"/></svg>'
ICON = "data:image/svg+xml;base64," + base64.b64encode(ICON_SVG).decode()  # EIP-6963 icons are data URIs

# The page's side of the wallet: each request goes to `window.b200TestWallet` (the test's Python), errors come
# back as EIP-1193 errors (with their code). `config` names the wallets, and whether the first one is also
# injected as `window.ethereum` (EIP-1193) and whether they all announce themselves (EIP-6963).
PROVIDER_SCRIPT = """
(() => {
  const config = %s;
  function provider(name) {
    const listeners = {};
    return {
      async request(args) {
        const answer = await window.b200TestWallet(name, args.method, args.params || []);
        if (answer.error) {
          const error = new Error(answer.error.message);
          error.code = answer.error.code;
          throw error;
        }
        for (const [event, value] of answer.events || []) (listeners[event] || []).forEach((f) => f(value));
        return answer.result;
      },
      on(event, listener) { (listeners[event] = listeners[event] || []).push(listener); },
      removeListener(event, listener) {
        listeners[event] = (listeners[event] || []).filter((other) => other !== listener);
      },
    };
  }
  const wallets = config.wallets.map((wallet) => ({
    info: Object.freeze({ uuid: wallet.uuid, name: wallet.name, icon: config.icon, rdns: wallet.rdns }),
    provider: provider(wallet.name),
  }));
  if (config.injected) window.ethereum = wallets[0].provider;
  if (config.announce) {
    const announce = () => wallets.forEach((detail) =>
      window.dispatchEvent(new CustomEvent("eip6963:announceProvider", { detail: Object.freeze(detail) })));
    window.addEventListener("eip6963:requestProvider", announce);
    announce();
  }
})();
"""


def _selector(signature: str) -> str:
    return "0x" + function_signature_to_4byte_selector(signature).hex()


class BrowserWallet:
    """What an injected wallet answers, for the page's requests: one account (a fresh key anvil funds), the chain
    it is on, the chains it knows, and a customer who declines the next transfer when told to."""

    def __init__(self, anvil, *, name: str, chain_id: int, knows: set[int]) -> None:
        self.anvil = anvil
        self.name = name
        self.account = Account.create()
        self.chain_id = chain_id
        self.knows = set(knows) | {chain_id}
        self.decline_next = False
        self.requests: list[tuple[str, str, list]] = []  # (wallet, method, params), in order
        self.sent: list[str] = []
        anvil.call("anvil_setBalance", [self.account.address, hex(10**20)])  # gas, and the coin to pay with

    @property
    def address(self) -> str:
        return self.account.address

    def methods(self) -> list[str]:
        return [method for _, method, _ in self.requests]

    def __call__(self, wallet: str, method: str, params: list) -> dict:
        self.requests.append((wallet, method, params))
        if wallet != self.name:
            return {"error": {"code": -32603, "message": f"{wallet} was not the wallet chosen"}}
        try:
            return self.answer(method, params)
        except WalletError as error:
            return {"error": {"code": error.code, "message": str(error)}}

    def answer(self, method: str, params: list) -> dict:
        if method in ("eth_requestAccounts", "eth_accounts"):
            return {"result": [self.address]}
        if method == "eth_chainId":
            return {"result": hex(self.chain_id)}
        if method == "wallet_switchEthereumChain":
            wanted = int(params[0]["chainId"], 16)
            if wanted not in self.knows:
                raise WalletError(4902, "Unrecognized chain ID")
            self.chain_id = wanted
            return {"result": None, "events": [["chainChanged", hex(wanted)]]}
        if method == "eth_sendTransaction":
            if self.decline_next:
                self.decline_next = False
                raise WalletError(4001, "User rejected the request.")
            return {"result": self.sign_and_send(params[0])}
        raise WalletError(4200, f"{method} is not supported")

    def sign_and_send(self, request: dict) -> str:
        """Sign what the page asked for, as it asked (on the chain the wallet is on), and send it raw to anvil."""
        assert request["from"] == self.address
        assert int(request["chainId"], 16) == self.chain_id == LOCAL_CHAIN_ID
        call = {
            "from": self.address,
            "to": to_checksum_address(request["to"]),
            "value": request.get("value", "0x0"),
            "data": request.get("data", "0x"),
        }
        base_fee = int(self.anvil.call("eth_getBlockByNumber", ["latest", False])["baseFeePerGas"], 16)
        transaction = {
            "to": call["to"],
            "value": int(call["value"], 16),
            "data": call["data"],
            "chainId": self.chain_id,
            "nonce": int(self.anvil.call("eth_getTransactionCount", [self.address, "pending"]), 16),
            "gas": int(self.anvil.call("eth_estimateGas", [call]), 16),
            "maxPriorityFeePerGas": 10**9,
            "maxFeePerGas": 2 * base_fee + 10**9,
        }
        signed = self.account.sign_transaction(transaction)
        tx_hash = self.anvil.call("eth_sendRawTransaction", ["0x" + signed.raw_transaction.hex().removeprefix("0x")])
        self.sent.append(tx_hash)
        return tx_hash


class WalletError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def with_wallet(context, wallet: BrowserWallet, *, names: list[str], injected: bool) -> None:
    config = {
        "icon": ICON,
        "injected": injected,
        "announce": True,
        "wallets": [
            {"name": name, "uuid": str(uuid.uuid4()), "rdns": f"org.example.wallet{i}"} for i, name in enumerate(names)
        ],
    }
    context.expose_function("b200TestWallet", wallet)
    context.add_init_script(PROVIDER_SCRIPT % json.dumps(config))


def placed_order(shop, order_payload, *, asset: str, language: str):
    """An order placed through the API in `asset` and `language`: its page's path and its payment request."""
    from payments.models import PaymentRequest

    placed = order_placed(shop, order_payload, asset=asset, language=language)
    payment = PaymentRequest.objects.select_related("asset__network").get(order__reference=placed["reference"])
    return "/" + placed["status_url"].split("://", 1)[1].split("/", 1)[1], payment


def token_balance(anvil, token: str, holder: str) -> int:
    data = _selector("balanceOf(address)") + encode(["address"], [holder]).hex()
    return int(anvil.call("eth_call", [{"to": token, "data": data}, "latest"]), 16)


def coin_balance(anvil, holder: str) -> int:
    return int(anvil.call("eth_getBalance", [holder, "latest"]), 16)


def translated(language: str, message: str) -> str:
    with translation.override(language):
        return gettext(message)


def scripts_ran(page) -> None:
    """The page's deferred scripts have run (the wallet script has looked for wallets)."""
    page.wait_for_load_state("load")
    page.wait_for_function("() => window.B200WalletPay !== undefined")


def test_a_customer_pays_usdc_from_their_browser_wallet_and_the_order_sees_the_transfer(
    browser, live_server, open_context, page_checks, shop, order_payload
):
    from payments.devnet import devnet_mint
    from payments.models import Notice
    from payments.networks import rpc_client

    path, payment = placed_order(shop, order_payload, asset="USDC", language="en")
    wallet = BrowserWallet(shop.anvil, name="Test Wallet", chain_id=1, knows={1})
    devnet_mint(client=rpc_client(payment.asset.network), symbol="USDC", to=wallet.address, amount=Decimal(10_000))
    before = token_balance(shop.anvil, payment.contract, payment.address)
    # Given a browser without a wallet: no button, the rest of the page as before ("I have paid" too)
    plain = open_context("en").new_page()
    plain.goto(path)
    scripts_ran(plain)
    assert plain.locator(f"#wallet-pay-{payment.address}").is_hidden()
    assert plain.locator("form.paid-form").is_visible()
    # Nor without JavaScript
    no_script = browser.new_context(base_url=live_server.url, viewport=VIEWPORT, java_script_enabled=False)
    try:
        page = no_script.new_page()
        page.goto(path)
        assert page.locator(f"#wallet-pay-{payment.address}").count() == 1
        assert page.locator(f"#wallet-pay-{payment.address}").is_hidden()
        assert page.locator("form.paid-form").is_visible()
    finally:
        no_script.close()

    context = open_context("en")
    with_wallet(context, wallet, names=["Test Wallet"], injected=True)
    page = context.new_page()
    block = page.locator(f"#wallet-pay-{payment.address}")
    start = block.locator("[data-wallet-start]")
    status = block.locator("[data-wallet-status]")
    try:
        # Given the order page, in a browser with a wallet: the button shows
        page.goto(path)
        start.wait_for(state="visible")
        page_checks(page, "en-wallet-01-button")

        # When the wallet does not know the local chain (and the page knows no public RPC for it to add)
        start.click()
        status.filter(has_text=str(LOCAL_CHAIN_ID)).wait_for()
        # Then it was asked to switch to the order's chain, and told the customer to add it first; nothing sent
        switches = [params for _, method, params in wallet.requests if method == "wallet_switchEthereumChain"]
        assert switches == [[{"chainId": hex(LOCAL_CHAIN_ID)}]]
        assert "wallet_addEthereumChain" not in wallet.methods() and wallet.sent == []
        assert payment.asset.network.name in status.inner_text() and start.is_enabled()

        # When the customer has added it, but declines the transfer in the wallet: a calm word, the button stays
        wallet.knows.add(LOCAL_CHAIN_ID)
        wallet.decline_next = True
        start.click()
        status.filter(has_text="You declined in your wallet: nothing was sent.").wait_for()
        assert start.is_visible() and start.is_enabled() and wallet.sent == []

        # When they press it again and confirm
        with page.expect_navigation():
            start.click()

        # Then exactly the quoted USDC moved to the order's address, from the wallet's account
        assert len(wallet.sent) == 1
        tx_hash = wallet.sent[0]
        receipt = shop.anvil.call("eth_getTransactionReceipt", [tx_hash])
        assert int(receipt["status"], 16) == 1 and receipt["to"].lower() == payment.contract.lower()
        assert token_balance(shop.anvil, payment.contract, payment.address) - before == int(payment.amount_base_units)
        # And the hash went the "I have paid" way: a notice with it, and the transfer seen on the page
        assert Notice.objects.filter(payment=payment, tx_hash=tx_hash.lower()).exists()
        page.locator(".status--detected, .status--confirmed").first.wait_for()
        page_checks(page, "en-wallet-02-reported")

        shop.anvil.mine(2)  # the local network needs 2 confirmations
        call_command("scan_payments")
        page.reload()
        page.locator(".status--confirmed").first.wait_for()
    except Exception:
        page_checks.failure(page, "en-wallet-failure")
        raise

    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")


def test_a_customer_with_two_wallets_picks_one_and_pays_the_exact_coin_amount(
    open_context, page_checks, shop, order_payload
):
    from payments.models import Notice

    path, payment = placed_order(shop, order_payload, asset="ETH", language="fr")
    assert payment.contract is None
    # Already on the local chain: no switch to ask for
    wallet = BrowserWallet(shop.anvil, name="Test Wallet", chain_id=LOCAL_CHAIN_ID, knows=set())
    before = coin_balance(shop.anvil, payment.address)
    context = open_context("fr")
    with_wallet(context, wallet, names=["Other Wallet", "Test Wallet"], injected=False)
    page = context.new_page()
    block = page.locator(f"#wallet-pay-{payment.address}")
    try:
        # Given the order page with two wallets announced (EIP-6963) and none injected as window.ethereum
        page.goto(path)
        block.locator("[data-wallet-start]").click()
        choices = block.locator("[data-wallet-choices]")
        choices.wait_for(state="visible")
        assert choices.locator("button").all_inner_texts() == ["Other Wallet", "Test Wallet"]
        assert choices.locator("img").count() == 2
        assert translated("fr", "Several wallets are installed: pay with which one?") in choices.inner_text()
        page_checks(page, "fr-wallet-01-choose")

        # When the customer picks one and confirms there
        with page.expect_navigation():
            choices.get_by_role("button", name="Test Wallet").click()

        # Then only that wallet was asked, on its chain, for exactly the quoted coin amount
        assert {name for name, _, _ in wallet.requests} == {"Test Wallet"}
        assert "wallet_switchEthereumChain" not in wallet.methods()
        (tx_hash,) = wallet.sent
        assert coin_balance(shop.anvil, payment.address) - before == int(payment.amount_base_units)
        assert Notice.objects.filter(payment=payment, tx_hash=tx_hash.lower()).exists()
        page.locator(".status--detected, .status--confirmed").first.wait_for()
        page_checks(page, "fr-wallet-02-reported")
    except Exception:
        page_checks.failure(page, "fr-wallet-failure")
        raise
    assert not page_checks.axe_findings, page_checks.axe_findings
    nu_clean(page_checks, "the test")
