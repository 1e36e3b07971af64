"""The receipt at /o/<reference>/<token>/receipt/: only with the order's own token, only once the order is paid,
in the language the customer chose (the order's where the request names none), numbered after the order, with
the transfers that paid it, the grand total per asset and in USD once extensions were applied, the refunds that
went back, amounts in the page's locale and times for the customer's clock, printable without script, and
without the customer's contact data once it was erased.

The deposit addresses derive from a test mnemonic's xpub here, so the test holds the key the treasurer's signer
would: the refund on the receipt is a real signed transfer from the deposit address, seen by the scan."""

from __future__ import annotations

import datetime as dt

import pytest
from bip_utils import Bip39SeedGenerator, Bip44, Bip44Changes, Bip44Coins
from django.core.cache import cache
from django.utils.html import escape

from orders.models import Extension, ExtensionStatus
from orders.order_links import order_receipt_path, order_status_path
from payments.models import PaymentRequest, Refund
from shop.cancellation import order_cancel_with_refunds
from shop.personal_data import order_personal_data_erase
from tests.payments.verification.chain import Wallet
from tests.payments.verification.helpers import extend, order_of, payment_of, rental_active, settle_rounds, units
from tests.payments.verification.money_out import CUSTOMER_WALLET, EXCESS, refund_approved, staff
from tests.servers import rpc

# A well-known BIP-39 test vector: its keys guard nothing anywhere.
TEST_MNEMONIC = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
ACCOUNT = Bip44.FromSeed(Bip39SeedGenerator(TEST_MNEMONIC).Generate(), Bip44Coins.ETHEREUM).Purpose().Coin().Account(0)
TITLES = {"en": "Receipt for order {}", "es": "Recibo del pedido {}", "fr": "Reçu de la commande {}"}
WORDS = {  # a few of the receipt's own words in each language
    "en": ["Seller", "Customer", "What was bought", "Refunds", "Sent, waiting for confirmations"],
    "es": ["Vendedor", "Cliente", "Qué se compró", "Reembolsos", "Enviado, esperando confirmaciones"],
    "fr": ["Vendeur", "Client", "Ce qui a été acheté", "Remboursements", "Envoyé, en attente de confirmations"],
}
# The 1,990 USDC paid and the 2.5 USDC refunded, written as each language writes numbers (a no-break space groups
# thousands in Spanish and French)
AMOUNTS = {
    "en": ("1,990 USDC", "2.5 USDC", "1,990.00 USD"),
    "es": ("1\xa0990 USDC", "2,5 USDC", "1\xa0990,00 USD"),
    "fr": ("1\xa0990 USDC", "2,5 USDC", "1\xa0990,00 USD"),
}


@pytest.fixture(autouse=True)
def seller_and_keys(settings):
    settings.PAYMENTS_XPUB = ACCOUNT.PublicKey().ToExtended()
    settings.SELLER_NAME = "B200 Pairs Ltd"
    settings.SELLER_ADDRESS = "1 Example Street, 75001 Paris, France"
    settings.SELLER_TAX_ID = "FR00123456789"


def html_lang(response) -> str:
    return response.content.decode().split('<html lang="', 1)[1].split('"', 1)[0]


def receipt(client, placed: dict, token: str | None = None, **get):
    order = order_of(placed)
    path = order_receipt_path(order)
    if token is not None:
        path = path.replace(placed["access_token"], token)
    return client.get(path, **get)


def paid(chain, customer, scan_pass, *, extra: int = 0, **fields) -> tuple[dict, str]:
    """An order paid in USDC from the customer's wallet (plus `extra` units), final; and the transfer's hash."""
    placed = customer.order(**fields)
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) + extra)
    chain.mine(1)
    scan_pass()
    assert order_of(placed).status == "paid"
    return placed, sent.tx_hash.lower()


def refund_sent(chain, placed: dict, refund: Refund, client, scan_pass) -> str:
    """The approved refund paid exactly from the deposit address with its own key, as the signer does."""
    refund_approved(client, placed, refund, staff("reviewer", "rita"))
    payment = payment_of(placed)
    key = ACCOUNT.Change(Bip44Changes.CHAIN_EXT).AddressIndex(payment.derivation_index).PrivateKey().Raw().ToHex()
    signer = Wallet(chain.node.url, "0x" + key)
    rpc(chain.node.url, "anvil_setBalance", [signer.address, hex(10**18)])
    sent = signer.transfer(chain.usdc, CUSTOMER_WALLET, EXCESS)
    scan_pass()
    refund.refresh_from_db()
    assert refund.status == "sent"
    return sent.tx_hash.lower()


def test_another_orders_token_a_tampered_token_or_a_wrong_reference_open_no_receipt(chain, customer, scan_pass, client):
    # Given two paid orders
    mine, _ = paid(chain, customer, scan_pass)
    theirs, _ = paid(chain, customer, scan_pass)
    assert receipt(client, mine).status_code == 200

    # When someone asks for my receipt with the other order's token, a tampered token, or a made-up reference
    tampered = mine["access_token"][:-1] + ("0" if mine["access_token"][-1] != "0" else "1")
    answers = [
        receipt(client, mine, token=theirs["access_token"]),
        receipt(client, mine, token=tampered),
        client.get(order_receipt_path(order_of(mine)).replace(mine["reference"], "B2-AAAA-AAAA")),
    ]

    # Then each is the plain 404 the order page gives, with nothing of the order in it
    for answer in answers:
        assert answer.status_code == 404
        assert mine["reference"] not in answer.content.decode() and "Ada" not in answer.content.decode()


def test_guessing_receipt_tokens_from_one_ip_is_refused_with_429_after_the_limit(
    chain, customer, scan_pass, client, settings
):
    # Given a paid order, and the token rate limit on (3 wrong guesses per window)
    placed, _ = paid(chain, customer, scan_pass)
    settings.RATELIMIT_ENABLE, settings.RATELIMIT_TOKEN_FAILURES = True, 3
    cache.clear()

    # When one IP guesses receipt tokens three times
    for guess in ("a" * 64, "b" * 64, "c" * 64):
        assert receipt(client, placed, token=guess).status_code == 404

    # Then the next try, even with the right token, is refused until the window ends
    assert receipt(client, placed).status_code == 429
    cache.clear()


def test_an_unpaid_order_has_no_receipt_yet_and_its_page_does_not_link_one(customer, chain, client):
    # Given an order placed and not paid
    placed = customer.order()

    # When its customer opens the receipt's address
    answer = receipt(client, placed)

    # Then a page says there is no receipt yet, and the order page shows no link to one
    assert answer.status_code == 200
    assert "No receipt yet" in answer.content.decode()
    assert order_receipt_path(order_of(placed)) not in client.get(order_status_path(order_of(placed))).content.decode()
    # And that page too is in the language the customer's browser asks for
    assert html_lang(receipt(client, placed, headers={"Accept-Language": "fr"})) == "fr"


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_the_receipt_shows_seller_customer_lots_the_paying_transfer_and_the_refund_in_the_orders_language(
    language, chain, customer, scan_pass, client
):
    # Given an order placed in `language`, overpaid by 2.5 USDC, whose refund was sent back on-chain
    placed, paid_tx = paid(chain, customer, scan_pass, extra=EXCESS, language=language)
    refund = Refund.objects.get(payment=payment_of(placed))
    refund_tx = refund_sent(chain, placed, refund, client, scan_pass)
    order = order_of(placed)

    # When the customer opens the receipt from the order page, with a request that names no language of its own
    page = client.get(order_status_path(order)).content.decode()
    assert order_receipt_path(order) in page
    answer = client.get(order_receipt_path(order))

    # Then it is the order's receipt, numbered after it, in the order's language, printable and under the CSP
    assert answer.status_code == 200
    html = answer.content.decode()
    assert f'<html lang="{language}"' in html and answer["Content-Language"] == language
    assert escape(TITLES[language].format(order.reference)) in html
    assert f'<dd class="receipt__number">R-{order.reference}</dd>' in html
    for word in WORDS[language]:
        assert escape(word) in html, word
    assert 'media="print"' in html and "receipt-print.css" in html
    assert "<script>" not in html and "style=" not in html
    assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
    # Seller, customer, what was bought
    for text in ["B200 Pairs Ltd", "1 Example Street, 75001 Paris, France", "FR00123456789"]:
        assert text in html
    assert "Ada Lovelace Byron" in html and "ada@example.org" in html
    memory = "180 Go" if language == "fr" else "180 GB"
    assert order.gpu_model in html and memory in html and escape(order.preparation.localized("name", language)) in html
    # The payment: amount, asset, network and the transfer that paid it; the refund with its own transfer; every
    # amount written as the language writes numbers
    payment = payment_of(placed)
    paid_amount, refunded, usd = AMOUNTS[language]
    assert paid_amount in html and payment.asset.network.name in html and usd in html
    assert paid_tx in html
    assert refunded in html and refund_tx in html
    # The times: <time> elements in UTC, said so, that the page's script shows in the customer's time zone
    assert "data-local-times" in html
    assert f'<time datetime="{payment.settled_at.astimezone(dt.UTC).isoformat(timespec="seconds")}">' in html
    assert f'<time datetime="{order.created_at.astimezone(dt.UTC).isoformat(timespec="seconds")}">' in html
    assert html.count(" UTC</time>") == 2  # placed and paid: access not handed over yet


def test_the_receipt_follows_the_language_the_customer_chose_else_the_orders(chain, customer, scan_pass, client):
    # Given an order placed in French, paid
    placed, _ = paid(chain, customer, scan_pass, language="fr")
    path = order_receipt_path(order_of(placed))

    # When the receipt is opened by a request that names no language, or only ones the shop lacks
    # Then it is in the order's language
    assert html_lang(client.get(path)) == "fr"
    assert html_lang(client.get(path, headers={"Accept-Language": "de-DE,de;q=0.9,*;q=0.1"})) == "fr"

    # When the customer's browser asks for Spanish
    answer = client.get(path, headers={"Accept-Language": "es-ES,es;q=0.9,fr;q=0.5"})
    # Then it is in Spanish, as every other page of theirs
    assert html_lang(answer) == "es" and answer["Content-Language"] == "es"
    assert escape(TITLES["es"].format(placed["reference"])) in answer.content.decode()
    assert "Accept-Language" in answer["Vary"] and "Cookie" in answer["Vary"]

    # When they choose English with the receipt's language switcher, which brings them back to the receipt
    form = answer.content.decode().split('class="language-form"', 1)[1].split("</form>", 1)[0]
    assert f'name="next" value="{path}"' in form
    switched = client.post("/i18n/setlang/", {"language": "en", "next": path}, headers={"Accept-Language": "es"})
    assert (switched.status_code, switched["Location"]) == (302, path)

    # Then the receipt is in English, whatever the browser asks for
    answer = client.get(path, headers={"Accept-Language": "es-ES,es;q=0.9"})
    assert html_lang(answer) == "en" and answer["Content-Language"] == "en"
    assert escape(TITLES["en"].format(placed["reference"])) in answer.content.decode()


@pytest.mark.parametrize(
    ("language", "usd", "usdc", "eth"),
    [
        ("en", "4,879.00 USD", "2,889 USDC", "0.663334 ETH"),
        ("fr", "4\xa0879,00 USD", "2\xa0889 USDC", "0,663334 ETH"),
    ],
)
def test_after_extensions_the_receipt_adds_up_the_rental_and_each_extension_per_asset_and_in_usd(
    language, usd, usdc, eth, chain, customer, scan_pass, client
):
    # Given a rental of one lot for 7 days (1,990 USD) paid in USDC, handed over
    placed, _ = paid(chain, customer, scan_pass, language=language)
    rental_active(placed)
    number = f"R-{placed['reference']}"
    assert number in receipt(client, placed).content.decode()

    # And two extensions applied: 3 more days paid in USDC (899 USD), then 7 more days in ether (1,990 USD, quoted
    # as 0.663334 ETH at the local chain's 3,000 USD)
    for days, asset in ((3, "USDC"), (7, "ETH")):
        opened = extend(customer, placed, duration_days=days, asset=asset)
        assert opened.status_code == 201, opened.content
        payment = PaymentRequest.objects.get(extension_id=opened.json()["id"])
        if asset == "USDC":
            chain.wallet.pay_token(chain.usdc, payment.address, int(payment.amount_base_units))
        else:
            chain.wallet.pay_native(payment.address, int(payment.amount_base_units))
        settle_rounds(chain, scan_pass)
        assert Extension.objects.get(pk=payment.extension_id).status == ExtensionStatus.APPLIED

    # When the customer opens the receipt
    html = receipt(client, placed).content.decode()

    # Then it keeps its number, and its grand total adds the rental and both extensions up per asset paid in
    # (never one sum across assets) and in USD, in the page's locale
    assert f'<html lang="{language}"' in html and number in html
    total = html.split('id="grand-total-title"', 1)[1].split("</section>", 1)[0]
    assert usdc in total and eth in total and usd in total
    network = "Local development chain"
    on = "sur" if language == "fr" else "on"
    assert f"USDC {on} {network}" in total and f"ETH {on} {network}" in total
    assert total.index("USDC") < total.index("ETH")  # in the order the assets were first paid in


def test_after_erasure_the_receipt_keeps_the_money_and_drops_the_customer(chain, customer, scan_pass, client):
    # Given a paid order that staff cancelled (everything paid goes back) and whose contact data was erased
    placed, paid_tx = paid(chain, customer, scan_pass)
    order_cancel_with_refunds(order_id=order_of(placed).pk, actor="staff", reason="the customer asked")
    order_personal_data_erase(order_id=order_of(placed).pk, actor="staff", reason="the customer asked")

    # When the receipt is opened with the order's link
    answer = receipt(client, placed)

    # Then the transfers and the refund are there, the customer's name and email are not
    html = answer.content.decode()
    assert answer.status_code == 200
    assert Refund.objects.get(payment=payment_of(placed)).amount_text == "1990 USDC"
    refunds = html.split('id="refunds-title"', 1)[1].split("</section>", 1)[0]
    assert paid_tx in html and "1,990 USDC" in refunds
    assert "Ada" not in html and "ada@example.org" not in html and "erased-" not in html
    assert "contact data was erased" in html
