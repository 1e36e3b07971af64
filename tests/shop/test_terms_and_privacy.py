"""The terms of rental and the privacy notice: in English, Spanish and French, with the shop's real figures,
linked from the wizard's consent box and from every page's footer; a wrong order link points to "Find my order"."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

# One sentence of each page per language, from locale/<code>/LC_MESSAGES/django.po.
PAGES = {
    ("/terms/", "en"): ["Terms of rental", "The rental clock", "Overpaid: you sent more than the amount asked"],
    ("/terms/", "es"): ["Condiciones de alquiler", "El tiempo de alquiler", "Pago de más: envió más del importe"],
    ("/terms/", "fr"): ["Conditions de location", "La durée de location", "Trop-perçu : vous avez envoyé plus"],
    ("/privacy/", "en"): ["Privacy notice", "What we keep for each order", "Export or erasure"],
    ("/privacy/", "es"): ["Aviso de privacidad", "Lo que guardamos de cada pedido", "Exportación o borrado"],
    ("/privacy/", "fr"): ["Politique de confidentialité", "Ce que nous gardons pour chaque", "Export ou effacement"],
}


@pytest.mark.parametrize(("path", "language"), list(PAGES))
def test_each_page_is_in_the_visitors_language(path, language):
    page = Client().get(path, HTTP_ACCEPT_LANGUAGE=language)

    assert page.status_code == 200
    text = page.content.decode()
    assert f'<html lang="{language}"' in text
    for sentence in PAGES[(path, language)]:
        assert sentence in text


def test_the_terms_state_the_lot_the_durations_and_the_payment_window_the_shop_applies(settings):
    settings.PAYMENT_WINDOW_MINUTES = 45

    text = Client().get("/terms/").content.decode()

    assert "One lot is one node with 2 × NVIDIA B200 cards and 180 GB of memory per card" in text
    assert "3 days, 7 days, 30 days." in text
    assert "Pay it within 45 minutes" in text
    assert "Amounts worth less than 1.00 USD" in text


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_every_page_links_the_terms_the_privacy_notice_and_find_my_order_in_its_footer(language):
    for path in ("/", "/advisor/", "/order/", "/terms/", "/privacy/", "/order/find/"):
        page = Client().get(path, HTTP_ACCEPT_LANGUAGE=language).content.decode()
        footer = page.split('<footer class="site-footer">')[1]
        for href in ('href="/terms/"', 'href="/privacy/"', 'href="/order/find/"'):
            assert href in footer, (path, href)


@pytest.mark.usefixtures("only_local_network")
def test_the_wizards_consent_box_links_the_terms_and_the_privacy_notice(client, make_node):
    make_node()
    configured = client.post("/order/", {"lots": 1, "duration_days": 7, "preparation": "pytorch-blackwell"})
    assert configured.status_code == 302

    page = client.get("/order/contact/", HTTP_ACCEPT_LANGUAGE="es")

    assert page.status_code == 200
    consent = page.content.decode().split('name="terms"')[1].split("</div>\n      </div>")[0]
    assert 'href="/terms/"' in consent and 'href="/privacy/"' in consent
    assert "condiciones de alquiler" in consent


@pytest.mark.parametrize(
    ("language", "words"),
    [("en", "Find my order: get the links emailed again"), ("fr", "Retrouver ma commande : recevoir à nouveau")],
)
def test_a_wrong_order_link_lands_on_a_page_that_leads_to_find_my_order(language, words):
    page = Client().get("/o/B2-AAAA-BBBB/0123456789abcdef/", HTTP_ACCEPT_LANGUAGE=language)

    assert page.status_code == 404
    text = page.content.decode()
    assert 'href="/order/find/"' in text and words in text
    # and the page does not write the link's reference or token back (the language switcher goes home)
    assert "B2-AAAA-BBBB" not in text and "0123456789abcdef" not in text


@pytest.mark.parametrize(
    ("language", "sentence"),
    [
        ("en", "it is deleted with all its data 45 days after it expired"),
        ("es", "se elimina con todos sus datos 45 días después de caducar"),
        ("fr", "elle est supprimée avec toutes ses données 45 jours après son expiration"),
    ],
)
def test_the_privacy_notice_states_when_an_unpaid_order_is_deleted(settings, language, sentence):
    settings.UNPAID_ORDER_KEEP_DAYS = 45

    text = Client().get("/privacy/", HTTP_ACCEPT_LANGUAGE=language).content.decode()

    assert sentence in text


@pytest.mark.parametrize(
    ("language", "sentence"),
    [
        ("en", "about 5 years (1826 days) after the order's last change"),
        ("es", "unos 5 años (1826 días) desde el último cambio del pedido"),
        ("fr", "environ 5 ans (1826 jours) après la dernière modification de la commande"),
    ],
)
def test_the_privacy_notice_states_how_long_the_record_of_a_sale_is_kept(settings, language, sentence):
    settings.MONEY_EVIDENCE_KEEP_DAYS = 1826

    text = Client().get("/privacy/", HTTP_ACCEPT_LANGUAGE=language).content.decode()

    assert sentence in text
