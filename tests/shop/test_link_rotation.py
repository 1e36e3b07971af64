"""A leaked private link is made anew (issue 43, item 5 in part): `POST /api/v1/orders/<reference>/tokens/rotate/`
with the order's token answers the new token and link; the old link and token answer 404 at once, everywhere; the
new link is emailed to the order's address, in its language; a wrong token changes nothing."""

from __future__ import annotations

import pytest
from django.core import mail

from orders.models import OrderStatus, OutgoingEmail
from tests.api_answers import error_fields
from tests.stored_rows import an_order

pytestmark = pytest.mark.django_db


def rotate(client, reference: str, token: str):
    return client.post(f"/api/v1/orders/{reference}/tokens/rotate/", headers={"X-Order-Token": token})


def test_the_old_link_and_token_stop_working_at_once_and_the_new_ones_open_the_order(
    client, django_capture_on_commit_callbacks
):
    order = an_order(status=OrderStatus.ACTIVE)
    old = order.token

    with django_capture_on_commit_callbacks(execute=True):
        response = rotate(client, order.reference, old)

    assert response.status_code == 200
    new = response.json()["access_token"]
    assert new != old and response.json()["status_url"].endswith(f"/o/{order.reference}/{new}/")
    for token, status in ((old, 404), (new, 200)):
        assert client.get(f"/api/v1/orders/{order.reference}/", headers={"X-Order-Token": token}).status_code == status
        assert client.get(f"/o/{order.reference}/{token}/").status_code == status
    # the old token cannot make another link either
    assert error_fields(rotate(client, order.reference, old), "not_found")


def test_the_new_link_is_emailed_to_the_orders_address_in_its_language(client, django_capture_on_commit_callbacks):
    order = an_order(language="fr", email="ada@example.org")

    with django_capture_on_commit_callbacks(execute=True):
        new = rotate(client, order.reference, order.token).json()["access_token"]

    [sent] = mail.outbox
    assert sent.to == ["ada@example.org"]
    assert sent.subject == f"Commande {order.reference} : votre lien privé a été renouvelé"
    assert f"/o/{order.reference}/{new}/" in sent.body and order.token not in sent.body
    assert f"/o/{order.reference}/{new}/" in sent.alternatives[0][0]


def test_a_wrong_token_makes_no_new_link_and_sends_nothing(client, django_capture_on_commit_callbacks):
    order = an_order()

    with django_capture_on_commit_callbacks(execute=True):
        response = rotate(client, order.reference, "0" * 64)

    assert error_fields(response, "not_found") == {"detail": "Not found."}
    assert client.get(f"/o/{order.reference}/{order.token}/").status_code == 200
    assert not OutgoingEmail.objects.filter(name="order_link_rotated").exists() and not mail.outbox


def test_making_links_anew_is_limited_per_client(client, settings, django_capture_on_commit_callbacks):
    settings.RATELIMIT_ENABLE, settings.RATELIMIT_KEY_CHANGES = True, 2
    order = an_order()
    token = order.token
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            token = rotate(client, order.reference, token).json()["access_token"]

    refused = rotate(client, order.reference, token)

    assert refused.status_code == 429 and error_fields(refused, "rate_limited")
    assert len(mail.outbox) == 2


def test_the_order_pages_button_moves_the_customer_to_the_new_link(client, django_capture_on_commit_callbacks):
    order = an_order(language="es")
    page = client.get(f"/o/{order.reference}/{order.token}/")
    assert f'action="/o/{order.reference}/{order.token}/link/"' in page.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        moved = client.post(f"/o/{order.reference}/{order.token}/link/", follow=True, HTTP_ACCEPT_LANGUAGE="es")

    [(new_path, _status)] = moved.redirect_chain
    assert new_path.startswith(f"/o/{order.reference}/") and order.token not in new_path
    assert "Este es el nuevo enlace privado de su pedido" in moved.content.decode()
    assert client.get(f"/o/{order.reference}/{order.token}/").status_code == 404
    assert [m.subject for m in mail.outbox] == [f"Pedido {order.reference}: su enlace privado se ha renovado"]
    assert new_path in mail.outbox[0].body
