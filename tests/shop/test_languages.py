"""The shop in Spanish and French: chosen by the browser or the switcher, in pages, form errors and emails."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.core import mail
from django.utils.html import escape
from pytest_django.asserts import assertContains, assertRedirects

from orders.models import Order
from tests.api_answers import error_fields
from tests.shop.helpers import CATALOG_URL, ORDERS_URL

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]

PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


@dataclass(frozen=True)
class Language:
    """Strings taken from locale/<code>/LC_MESSAGES/django.po (and the catalog's own translations)."""

    code: str
    home_title: str  # "Rent NVIDIA B200 cards by the pair, pay with a crypto transfer"
    order_button: str  # "Order lots"
    configure_title: str  # "Choose your lots"
    lots_label: str  # "Lots (2 cards each)"
    update_summary: str  # "Update summary"
    contact_title: str  # "Your contact details"
    ssh_key_label: str  # "SSH public key"
    payment_title: str  # "How you will pay"
    private_key_error: str  # "This is a private key: never share it. ..."
    terms_error: str  # "Accept the terms to continue."
    sold_out: str  # "Sold out: no lot is available right now."
    bare_node: str  # the bare-node preparation's name
    email_subject: str  # "Order %(reference)s received: pay within 30 minutes"
    email_greeting: str  # "Hello %(name)s,"
    email_thanks: str  # "Thank you for your order %(reference)s. Your lots are held while you pay."


SPANISH = Language(
    code="es",
    home_title="Alquile tarjetas NVIDIA B200 por pares y pague con una transferencia en criptomonedas",
    order_button="Pedir lotes",
    configure_title="Elija sus lotes",
    lots_label="Lotes (2 tarjetas cada uno)",
    update_summary="Actualizar el resumen",
    contact_title="Sus datos de contacto",
    ssh_key_label="Clave pública SSH",
    payment_title="Cómo va a pagar",
    private_key_error="Esta es una clave privada: no la comparta nunca.",
    terms_error="Acepte las condiciones para continuar.",
    sold_out="Agotado: no queda ningún lote disponible en este momento.",
    bare_node="Nodo desnudo",
    email_subject="Pedido {reference} recibido: pague en los próximos 30 minutos",
    email_greeting="Hola, {name}:",
    email_thanks="Gracias por su pedido {reference}. Sus lotes quedan reservados mientras realiza el pago.",
)
FRENCH = Language(
    code="fr",
    home_title="Louez des cartes NVIDIA B200 par paires, payez par virement en cryptomonnaie",
    order_button="Commander des lots",
    configure_title="Choisissez vos lots",
    lots_label="Lots (2 cartes chacun)",
    update_summary="Mettre à jour le récapitulatif",
    contact_title="Vos coordonnées",
    ssh_key_label="Clé publique SSH",
    payment_title="Comment vous paierez",
    private_key_error="Ceci est une clé privée : ne la partagez jamais.",
    terms_error="Acceptez les conditions pour continuer.",
    sold_out="Complet : aucun lot n'est disponible pour le moment.",
    bare_node="Nœud nu",
    email_subject="Commande {reference} reçue : payez dans les 30 minutes",
    email_greeting="Bonjour {name},",
    email_thanks="Merci pour votre commande {reference}. Vos lots sont réservés le temps du paiement.",
)
LANGUAGES = [pytest.param(SPANISH, id="es"), pytest.param(FRENCH, id="fr")]


def html_lang(response) -> str:
    match = re.search(r'<html lang="([^"]+)"', response.content.decode())
    return match.group(1) if match else ""


def shows(response, text: str) -> None:
    """The page shows `text` as a person reads it (HTML-escaped in the source)."""
    assertContains(response, escape(text), status_code=response.status_code)


def configure(client) -> None:
    response = client.post("/order/", {"lots": 1, "duration_days": 7, "preparation": "bare-node", "continue": "1"})
    assertRedirects(response, "/order/contact/", fetch_redirect_response=False)


def contact_data(ssh_public_key: str, **changes) -> dict:
    """The contact step's fields; a change to None leaves the field out (an unticked box)."""
    data = {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@example.org",
        "ssh_public_key": ssh_public_key,
        "terms": "on",
        **changes,
    }
    return {key: value for key, value in data.items() if value is not None}


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_browser_language_is_used_on_the_home_page(client, make_node, language):
    # Given a free lot
    make_node()

    # When a browser that prefers the language opens the home page
    response = client.get("/", headers={"Accept-Language": f"{language.code},en;q=0.5"})

    # Then the page is marked and written in that language, catalog text included
    assert html_lang(response) == language.code
    shows(response, language.home_title)
    shows(response, language.order_button)
    shows(response, language.bare_node)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_regional_browser_language_falls_back_to_the_language(client, language):
    # Given a browser asking for a regional variant (es-MX, fr-CA)
    regional = {"es": "es-MX", "fr": "fr-CA"}[language.code]

    # When it opens the home page / Then it gets the language itself
    response = client.get("/", headers={"Accept-Language": regional})
    assert html_lang(response) == language.code
    shows(response, language.home_title)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_wizard_steps_are_translated(client, make_node, ssh_public_key, language):
    # Given a free lot and a browser that prefers the language
    make_node()
    headers = {"Accept-Language": language.code}

    # When the customer goes through the configure, contact and payment steps
    configure_page = client.get("/order/", headers=headers)
    client.post("/order/", {"lots": 1, "duration_days": 7, "preparation": "bare-node"}, headers=headers)
    contact_page = client.get("/order/contact/", headers=headers)
    client.post("/order/contact/", contact_data(ssh_public_key), headers=headers)
    payment_page = client.get("/order/payment/", headers=headers)

    # Then each step is in that language: titles, field labels and buttons
    for page in (configure_page, contact_page, payment_page):
        assert page.status_code == 200
        assert html_lang(page) == language.code
    shows(configure_page, language.configure_title)
    shows(configure_page, language.lots_label)
    shows(configure_page, language.update_summary)
    shows(contact_page, language.contact_title)
    shows(contact_page, language.ssh_key_label)
    shows(payment_page, language.payment_title)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_language_switcher_changes_the_language_of_later_pages(client, language):
    # Given a browser whose own preference is English
    english = {"Accept-Language": "en"}
    assert html_lang(client.get("/", headers=english)) == "en"

    # When the visitor picks the language in the switcher
    response = client.post("/i18n/setlang/", {"language": language.code, "next": "/order/"}, headers=english)

    # Then they are sent back, and the following pages are in that language
    assertRedirects(response, "/order/", fetch_redirect_response=False)
    home = client.get("/", headers=english)
    assert html_lang(home) == language.code
    shows(home, language.home_title)
    shows(client.get("/order/", headers=english), language.configure_title)

    # And switching back to English works the same way
    client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert html_lang(client.get("/", headers=english)) == "en"


@pytest.mark.parametrize("language", LANGUAGES)
def test_form_errors_are_translated(client, make_node, language):
    # Given a configured order, in the language
    make_node()
    client.post("/i18n/setlang/", {"language": language.code, "next": "/"})
    configure(client)

    # When a private key is pasted and the terms are not accepted
    response = client.post("/order/contact/", contact_data(PRIVATE_KEY, terms=None))

    # Then both errors are shown in that language
    assert response.status_code == 200
    shows(response, language.private_key_error)
    shows(response, language.terms_error)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_sold_out_error_of_the_api_is_translated(anvil, api_client, order_payload, language):
    # Given no free lot / When a client in the language orders
    response = api_client.post(ORDERS_URL, order_payload, format="json", headers={"Accept-Language": language.code})

    # Then the refusal is in that language
    assert response.status_code == 400
    assert error_fields(response, "invalid") == {"lots": [language.sold_out]}


def test_the_catalog_api_speaks_the_requested_language(api_client):
    # Given the default catalog / When a client asks for it in Spanish
    body = api_client.get(CATALOG_URL, headers={"Accept-Language": "es"}).json()

    # Then the preparations and purposes are the Spanish ones
    assert body["preparations"][0]["name"] == "Nodo desnudo"
    assert body["durations"][0]["purpose"] == "Validar un lanzamiento distribuido preparado de antemano."


def test_the_order_email_is_in_french_for_an_order_placed_in_french(
    anvil, client, make_node, ssh_public_key, django_capture_on_commit_callbacks
):
    # Given a customer who switched the shop to French and went through the wizard
    make_node()
    client.post("/i18n/setlang/", {"language": "fr", "next": "/"})
    configure(client)
    client.post("/order/contact/", contact_data(ssh_public_key))
    client.post("/order/payment/", {"payment_option": "local:ETH"})

    # When the order is placed
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/order/review/")

    # Then the order remembers French, and its email is written in French
    assert response.status_code == 302
    order = Order.objects.get(email="ada@example.org")
    assert order.language == "fr"
    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert email.subject == FRENCH.email_subject.format(reference=order.reference)
    assert FRENCH.email_greeting.format(name="Ada") in email.body
    assert FRENCH.email_thanks.format(reference=order.reference) in email.body
    assert response["Location"] in email.body
    html = email.alternatives[0][0]
    assert 'lang="fr"' in html
    assert escape(FRENCH.email_thanks.format(reference=order.reference)) in html


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_order_email_follows_the_language_of_an_api_order(
    make_node, place_order, django_capture_on_commit_callbacks, language
):
    # Given a free lot
    make_node()

    # When a client places an order with the language in Accept-Language
    with django_capture_on_commit_callbacks(execute=True):
        body = place_order(headers={"Accept-Language": language.code})

    # Then the email is in that language
    assert Order.objects.get(reference=body["reference"]).language == language.code
    email = mail.outbox[0]
    assert email.subject == language.email_subject.format(reference=body["reference"])
    assert language.email_thanks.format(reference=body["reference"]) in email.body


def test_an_explicit_language_in_the_api_body_wins_over_the_header(
    make_node, place_order, django_capture_on_commit_callbacks
):
    # Given a free lot
    make_node()

    # When a client with an English header asks for French in the body
    with django_capture_on_commit_callbacks(execute=True):
        body = place_order(headers={"Accept-Language": "en"}, language="fr")

    # Then the order and its email are French
    assert Order.objects.get(reference=body["reference"]).language == "fr"
    assert mail.outbox[0].subject == FRENCH.email_subject.format(reference=body["reference"])
