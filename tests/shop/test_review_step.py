"""The review step names the payment as the customer chose it on the payment step: the network by the name
customers know it by, not by the slug the shop keys it with."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from payments.models import Network
from tests.shop.test_wizard import walk_to_review

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("only_local_network")]


def test_the_review_step_names_the_network_and_the_token_not_the_networks_slug(client, make_node, ssh_public_key):
    # Given a customer who chose ether on the local development chain
    make_node()
    walk_to_review(client, ssh_public_key)
    network = Network.objects.get(slug="local")
    assert network.name != network.slug

    # When they review the order
    review = client.get("/order/review/")

    # Then the payment section shows the token's symbol and the network's name, never its slug
    html = review.content.decode()
    payment = html[html.index('id="review-payment"') :]
    assert f"<dd>{escape(network.name)}</dd>" in payment
    assert "<dd>ETH</dd>" in payment
    assert f"<dd>{network.slug}</dd>" not in payment
