"""The HTML order wizard: home, configure, contact, payment, review, and the order's status page."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.utils.html import escape
from pytest_django.asserts import assertContains, assertNotContains, assertRedirects, assertTemplateUsed

from orders.models import Order, Reservation
from payments.models import PaymentRequest
from payments.quotes import format_units
from tests.shop.helpers import ORDERS_URL

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

CUSTOMER_EMAIL = "wizard@example.org"
STATUS_PATH = re.compile(r"^/o/(?P<reference>B2-[0-9A-Z]{4}-[0-9A-Z]{4})/(?P<token>[0-9a-f]+)/$")


def configure(client, lots: int = 1, days: int = 7, preparation: str = "pytorch-blackwell", button: str = "continue"):
    return client.post("/order/", {"lots": lots, "duration_days": days, "preparation": preparation, button: "1"})


def contact(client, ssh_public_key: str, **changes):
    data = {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": CUSTOMER_EMAIL,
        "ssh_public_key": ssh_public_key,
        "hypothesis_kind": "bigger_batch",
        "hypothesis": "A global batch of 2048 fits when sharded.",
        "terms": "on",
        **changes,
    }
    return client.post("/order/contact/", {key: value for key, value in data.items() if value is not None})


def pay_with(client, option: str = "local:ETH"):
    return client.post("/order/payment/", {"payment_option": option})


def walk_to_review(client, ssh_public_key: str, lots: int = 1) -> None:
    assertRedirects(configure(client, lots=lots), "/order/contact/", fetch_redirect_response=False)
    assertRedirects(contact(client, ssh_public_key), "/order/payment/", fetch_redirect_response=False)
    assertRedirects(pay_with(client), "/order/review/", fetch_redirect_response=False)


def field_errors(response, field: str) -> str:
    """The text of the error list shown next to a field (empty when there is none)."""
    match = re.search(rf'<ul class="field__errors" id="id_{field}_error">(.*?)</ul>', response.content.decode(), re.S)
    return match.group(1) if match else ""


def test_the_home_page_shows_the_lot_and_a_link_to_order(client, make_node):
    # Given a free lot
    make_node()

    # When a visitor opens the home page
    response = client.get("/")

    # Then it shows what a lot is (B200 cards of 180 GB each) and links to the wizard
    assertContains(response, "NVIDIA B200")
    assertContains(response, "180 GB")
    assertContains(response, 'href="/order/"')
    assertContains(response, "1 lot available now.")


def test_the_home_page_says_sold_out_without_free_lots(client):
    # Given no node / When a visitor opens the home page / Then it says so
    assertContains(client.get("/"), "Sold out.")


def test_ordering_more_lots_than_available_shows_the_error_next_to_the_field(client, make_node):
    # Given two free lots
    make_node()
    make_node()

    # When three are asked for on the configure step
    response = configure(client, lots=3)

    # Then the customer stays on the step, with the error beside the lots field
    assert response.status_code == 200
    assertTemplateUsed(response, "shop/order_configure.html")
    assert "Only 2 lots are available right now." in field_errors(response, "lots")
    assertContains(response, 'aria-invalid="true"')


def test_a_first_visit_shows_the_summary_of_the_defaults_without_storing_a_session(client, make_node):
    # Given a free lot / When a new visitor opens the first step
    make_node()
    page = client.get("/order/")

    # Then the summary shows one lot's 2 cards at the first duration's price, and no session row was made
    assertContains(page, "2 cards")
    assertContains(page, "899.00 USD")
    assert settings.SESSION_COOKIE_NAME not in page.cookies
    assert not Session.objects.exists()


def test_a_link_with_lots_shows_that_many_in_the_summary_and_keeps_it(client, make_node):
    make_node()

    page = client.get("/order/?lots=3")

    assertContains(page, "6 cards")
    assert client.session["order_wizard"]["lots"] == 3


def test_update_summary_recomputes_the_cards_and_the_price(client, make_node):
    # Given three free lots
    for _ in range(3):
        make_node()

    # When the customer asks for 3 lots for 7 days and presses "Update summary"
    response = configure(client, lots=3, days=7, button="refresh")

    # Then the same step comes back, its summary showing 6 cards and 3 x 1,990 USD
    assertRedirects(response, "/order/", fetch_redirect_response=False)
    page = client.get("/order/")
    assertContains(page, "6 cards")
    assertContains(page, "5,970.00 USD")
    assertContains(page, 'value="3"')


def test_continue_on_the_configure_step_goes_to_the_contact_step(client, make_node):
    # Given a free lot / When the customer continues from the configure step
    make_node()

    # Then the contact step comes next, and its summary shows 2 cards
    assertRedirects(configure(client, lots=1), "/order/contact/", fetch_redirect_response=False)
    assertContains(client.get("/order/contact/"), "2 cards")


def test_a_private_key_pasted_on_the_contact_step_is_refused_with_a_warning(client, make_node):
    # Given a configured order
    make_node()
    configure(client)

    # When the customer pastes a private key instead of the public one
    private = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    response = contact(client, private)

    # Then the step comes back with the private-key message beside the key field
    assert response.status_code == 200
    assert "This is a private key: never share it." in field_errors(response, "ssh_public_key")


def test_the_terms_must_be_accepted(client, make_node, ssh_public_key):
    # Given a configured order
    make_node()
    configure(client)

    # When the customer continues without ticking the terms
    response = contact(client, ssh_public_key, terms=None)

    # Then the step says the terms must be accepted
    assert response.status_code == 200
    assert "Accept the terms to continue." in field_errors(response, "terms")


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZp old@lab", "DSA keys"),
        ("ssh-ed25519 ???not-base64??? me@lab", "not valid base64"),
        ("my key is on my laptop", "Unknown key type"),
    ],
    ids=["dsa", "bad-base64", "garbage"],
)
def test_an_unusable_ssh_key_is_refused_on_the_contact_step(client, make_node, key, message):
    # Given a configured order
    make_node()
    configure(client)

    # When the customer pastes a key access could not use
    response = contact(client, key)

    # Then the step comes back with the reason beside the key field
    assert response.status_code == 200
    assert message in field_errors(response, "ssh_public_key")


def test_the_payment_step_lists_ether_on_the_local_chain(client, make_node, ssh_public_key):
    # Given configured contact details
    make_node()
    configure(client)
    contact(client, ssh_public_key)

    # When the payment step opens
    response = client.get("/order/payment/")

    # Then ether on the local chain can be chosen
    assertContains(response, 'value="local:ETH"')
    assertContains(response, "Local development chain")


@pytest.mark.parametrize("option", ["base:USDC", "solana:SOL", "local:USDC"])
def test_the_payment_step_refuses_an_option_it_did_not_list(client, make_node, ssh_public_key, option):
    # Given configured contact details
    make_node()
    configure(client)
    contact(client, ssh_public_key)

    # When an option that was not listed is posted
    response = pay_with(client, option)

    # Then the step comes back with an error, and the review is still out of reach
    assert response.status_code == 200
    assert "Choose one of the listed assets and networks." in field_errors(response, "payment_option")
    assertRedirects(client.get("/order/review/"), "/order/payment/", fetch_redirect_response=False)


@pytest.mark.parametrize(
    ("done", "visited", "first_missing"),
    [
        ([], "/order/contact/", "/order/"),
        ([], "/order/payment/", "/order/"),
        ([], "/order/review/", "/order/"),
        (["configure"], "/order/payment/", "/order/contact/"),
        (["configure"], "/order/review/", "/order/contact/"),
        (["configure", "contact"], "/order/review/", "/order/payment/"),
    ],
)
def test_skipping_steps_redirects_to_the_first_missing_step(
    client, make_node, ssh_public_key, done, visited, first_missing
):
    # Given a free lot and some steps completed
    make_node()
    if "configure" in done:
        configure(client)
    if "contact" in done:
        contact(client, ssh_public_key)

    # When a later step is opened directly / Then the customer is sent to the first missing step
    assertRedirects(client.get(visited), first_missing, fetch_redirect_response=False)


def test_the_review_step_places_the_order_and_opens_its_status_page(anvil, client, make_node, ssh_public_key):
    # Given a customer who went through the steps
    make_node()
    walk_to_review(client, ssh_public_key)
    review = client.get("/order/review/")
    assertContains(review, CUSTOMER_EMAIL)
    assertContains(review, "Place order")

    # When the order is placed
    response = client.post("/order/review/")

    # Then the browser lands on the order's secret status page
    assert response.status_code == 302
    match = STATUS_PATH.match(response["Location"])
    assert match, response["Location"]
    order = Order.objects.get(reference=match["reference"])
    assert order.email == CUSTOMER_EMAIL
    assert order.status == "awaiting_payment"
    assert order.lots == 1

    # And the status page shows how to pay: address, exact amount, network, deadline, warning and a QR code
    page = client.get(response["Location"])
    assert page.status_code == 200
    payment = order.payment
    assertContains(page, payment.address)
    amount = f'data-copy-value="{payment.amount}"><code class="amount" id="pay-amount">{payment.amount}</code>'
    assertContains(page, amount)
    assertContains(page, '<span class="pay-card__asset">ETH</span>')
    assertContains(page, "Local development chain")
    assertContains(page, "Deadline")
    # (to the second: `<time datetime>` allows at most three digits of a second fraction)
    assertContains(page, f'datetime="{payment.expires_at.astimezone(dt.UTC).isoformat(timespec="seconds")}"')
    assertContains(page, escape("Send only ETH on Local development chain (chain id 31337)."))
    assertContains(page, "Funds sent on another network or in another token are not credited automatically")
    assert re.search(r"<svg[^>]*>.*</svg>", page.content.decode(), re.S)
    assertContains(page, order.reference)


def test_the_status_page_asks_for_the_wallet_friendly_price(anvil, client, make_node, ssh_public_key):
    # Given one lot for 7 days (1,990 USD) placed through the wizard, in ether at the development rate
    make_node()
    walk_to_review(client, ssh_public_key)
    location = client.post("/order/review/")["Location"]
    assert settings.DEV_NATIVE_USD_RATE == "3000"
    wei = 663_334 * 10**12  # 0.66333... ETH rounded up to six significant digits

    # When its status page is opened
    page = client.get(location)

    # Then it asks for the price converted to ether, rounded up to six significant digits, digit for digit
    assertContains(page, f'<code class="amount" id="pay-amount">{format_units(wei, 18)}</code>')
    assertContains(page, f"<dt>In base units</dt><dd><code>{wei}</code></dd>", html=False)


def test_placing_the_order_empties_the_wizard(anvil, client, make_node, ssh_public_key):
    # Given an order placed through the wizard
    make_node()
    make_node()
    walk_to_review(client, ssh_public_key)
    client.post("/order/review/")

    # When the customer opens the review step again / Then a new order starts from the first step
    assertRedirects(client.get("/order/review/"), "/order/", fetch_redirect_response=False)
    assert Order.objects.count() == 1


def test_when_the_last_lot_goes_before_placing_the_order_says_sold_out(
    anvil, client, api_client, make_node, ssh_public_key, order_payload
):
    # Given one free lot and a customer on the review step
    make_node()
    walk_to_review(client, ssh_public_key)
    assert client.get("/order/review/").status_code == 200

    # When someone else takes the last lot through the API first
    competing = api_client.post(ORDERS_URL, {**order_payload, "email": "grace@example.org"}, format="json")
    assert competing.status_code == 201
    response = client.post("/order/review/")

    # Then placing shows the sold-out error, and nothing is stored or held for this customer
    assert response.status_code == 400
    assertContains(response, "Your order could not be placed", status_code=400)
    assertContains(response, "Sold out: no lot is available right now.", status_code=400)
    assert not Order.objects.filter(email=CUSTOMER_EMAIL).exists()
    assert Reservation.objects.count() == 1
    assert PaymentRequest.objects.count() == 1


def test_the_status_page_with_a_wrong_token_is_a_404(anvil, client, make_node, ssh_public_key):
    # Given an order placed through the wizard
    make_node()
    walk_to_review(client, ssh_public_key)
    match = STATUS_PATH.match(client.post("/order/review/")["Location"])
    reference, token = match["reference"], match["token"]

    # When its status page is opened with a wrong token, or for an unknown reference
    wrong_token = client.get(f"/o/{reference}/{'0' * len(token)}/")
    unknown = client.get(f"/o/B2-ZZZZ-ZZZZ/{token}/")

    # Then both are plain 404s that show nothing of the order
    assert wrong_token.status_code == 404
    assert unknown.status_code == 404
    assertNotContains(wrong_token, reference, status_code=404)
