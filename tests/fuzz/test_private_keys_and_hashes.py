"""A private key pasted as the SSH key, and a malformed transaction hash on "I have paid": refused on the
field with a message that says what it is, and the private key is never stored or sent back."""

from __future__ import annotations

import pytest
from django.test import Client

from payments.models import Notice
from tests.api_answers import error_fields
from tests.fuzz.forms import field_errors
from tests.fuzz.helpers import stored_state
from tests.fuzz.strategies import OPENSSH_PRIVATE_KEY, RSA_PRIVATE_KEY
from tests.shop.helpers import ORDERS_URL

pytestmark = [pytest.mark.django_db]

PRIVATE_KEYS = [
    pytest.param(OPENSSH_PRIVATE_KEY, id="openssh-private-key"),
    pytest.param(RSA_PRIVATE_KEY, id="pem-rsa-private-key"),
    pytest.param("  " + OPENSSH_PRIVATE_KEY.replace("\n", "\r\n"), id="openssh-private-key-with-crlf"),
]
PRIVATE_KEY_MESSAGE = "This is a private key: never share it."


def secret_lines(key: str) -> list[str]:
    """The base64 lines between the PEM armour: what must never leave the customer's machine again."""
    return [line.strip() for line in key.strip().splitlines()[1:-1] if line.strip()]


def assert_not_anywhere(key: str, text: str) -> None:
    for line in secret_lines(key):
        assert line not in text


@pytest.mark.parametrize("key", PRIVATE_KEYS)
def test_a_private_key_posted_to_the_api_is_refused_as_such_and_never_stored_or_echoed(
    shop_with_lots, order_payload, key
):
    # Given free lots
    before = stored_state()

    # When an order is posted with a private key as the SSH key
    response = Client().post(ORDERS_URL, {**order_payload, "ssh_public_key": key}, content_type="application/json")

    # Then the 400 says it is a private key, on that field, without repeating it
    assert response.status_code == 400
    assert list(error_fields(response, "invalid")) == ["ssh_public_key"]
    assert PRIVATE_KEY_MESSAGE in response.json()["ssh_public_key"][0]
    assert_not_anywhere(key, response.content.decode())
    # And nothing is stored
    assert stored_state() == before


@pytest.mark.parametrize("key", PRIVATE_KEYS)
def test_a_private_key_pasted_in_the_contact_step_is_refused_and_the_page_comes_back_without_it(shop_with_lots, key):
    # Given the contact step of the wizard
    client = Client()
    client.post("/order/", {"lots": "1", "duration_days": "7", "preparation": "pytorch-blackwell", "continue": "1"})
    contact = {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@example.org",
        "ssh_public_key": key,
        "terms": "on",
    }

    # When the private key is pasted in the SSH key field
    response = client.post("/order/contact/", contact)

    # Then the page comes back with the warning next to the field, and an empty field
    assert response.status_code == 200
    assert PRIVATE_KEY_MESSAGE in field_errors(response)["ssh_public_key"]
    assert_not_anywhere(key, response.content.decode())
    # And the other answers are kept for the customer to correct only the key
    assert 'value="ada@example.org"' in response.content.decode()
    # And the wizard kept nothing of it
    assert "ssh_public_key" not in client.session.get("order_wizard", {})


BAD_HASHES = [
    pytest.param("0x" + "a" * 63, id="63-hex-digits"),
    pytest.param("0x" + "a" * 65, id="65-hex-digits"),
    pytest.param("0x" + "g" * 64, id="not-hex"),
    pytest.param("a" * 66, id="no-0x-prefix"),
    pytest.param("0x" + "a" * 62 + "é1", id="non-ascii"),
    pytest.param("0x" + "٣" * 64, id="arabic-indic-digits"),
    pytest.param("0x" + "a" * 64 + "\x00", id="nul-byte"),
    pytest.param("0x" + "ab" * 150, id="over-200-characters"),
    pytest.param("<script>alert(1)</script>", id="markup"),
]


@pytest.mark.parametrize("tx_hash", BAD_HASHES)
def test_a_malformed_tx_hash_on_i_have_paid_is_a_400_on_tx_hash_in_the_api(placed_order, tx_hash):
    # Given an order and its token
    path = f"{ORDERS_URL}{placed_order['reference']}/paid/"
    headers = {"X-Order-Token": placed_order["access_token"]}

    # When "I have paid" names something that is not a transaction hash
    response = Client().post(path, {"tx_hash": tx_hash}, content_type="application/json", headers=headers)

    # Then the 400 is on tx_hash alone, with a message, and no notice is recorded
    assert response.status_code == 400
    assert list(error_fields(response, "invalid")) == ["tx_hash"]
    assert response.json()["tx_hash"][0]
    assert not Notice.objects.exists()


@pytest.mark.parametrize("tx_hash", BAD_HASHES)
def test_a_malformed_tx_hash_on_the_order_page_shows_the_error_next_to_the_field(placed_order, tx_hash):
    # Given the order's page / When "I have paid" is pressed with a malformed hash
    response = Client().post(f"{placed_order['status_url']}paid/", {"tx_hash": tx_hash})

    # Then the page comes back (400) with the error next to the hash field, and no notice is recorded
    assert response.status_code == 400
    errors = field_errors(response)
    assert list(errors) == ["tx_hash"]
    assert "<li>" in errors["tx_hash"]
    assert "<script>alert(1)</script>" not in response.content.decode()
    assert not Notice.objects.exists()
