"""The console's buttons share one body (shop.ops_views.operator_button): only an operator's POST acts, a
refusal comes back as an error in its own words, and every answer leads back to the console."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from tests.staff import STAFF_PASSWORD

BUTTONS = [
    "/ops/orders/NOSUCH/prepare/",
    "/ops/orders/NOSUCH/stop/",
    "/ops/nodes/no-such-node/recheck/",
    "/ops/nodes/no-such-node/move/",
    "/ops/moves/999999/release/",
    "/ops/downtime/999999/decide/",
    "/ops/outflows/999999/acknowledge/",
]


@pytest.fixture
def operator_client(operator, client):
    client.login(username="olga", password=STAFF_PASSWORD)
    return client


def shown(response) -> list[tuple[str, str]]:
    return [(message.level_tag, message.message) for message in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("path", BUTTONS)
def test_a_button_answers_only_a_post(operator_client, path):
    # When an operator opens a button's address instead of pressing it
    response = operator_client.get(path)

    # Then nothing is done
    assert response.status_code == 405


@pytest.mark.parametrize("path", BUTTONS)
def test_a_button_for_something_that_does_not_exist_is_a_404(operator_client, path):
    assert operator_client.post(path).status_code == 404


@pytest.mark.parametrize("path", BUTTONS)
def test_a_button_sends_a_stranger_to_the_login_page(client, db, path):
    response = client.post(path)

    assert response.status_code == 302
    assert "/ops/" not in response["Location"].split("?")[0]


def test_a_refused_action_is_shown_as_an_error_in_its_own_words_and_leads_back_to_the_console(
    operator_client, make_node
):
    # Given a node that carries no rental
    node = make_node()

    # When the operator presses "Move to a spare node" on it
    response = operator_client.post(f"/ops/nodes/{node.name}/move/")

    # Then the refusal is shown as an error, and the console comes back
    assert response.status_code == 302
    assert response["Location"] == "/ops/"
    assert shown(response) == [("error", f"{node.name} carries no customer's access: there is no rental to move")]


def test_a_refused_recheck_is_shown_as_an_error_too(operator_client, make_node):
    # Given a node in sale (only a failed node or one in maintenance is rechecked)
    node = make_node()

    # When the operator presses "Recheck"
    response = operator_client.post(f"/ops/nodes/{node.name}/recheck/")

    # Then it is refused in words, and nothing was started
    assert response["Location"] == "/ops/"
    [(level, words)] = shown(response)
    assert level == "error"
    assert node.name in words or "preparation" in words
