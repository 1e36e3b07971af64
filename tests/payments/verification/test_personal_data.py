"""A customer's contact data, on request: staff export it and erase it; the payment evidence stays."""

from __future__ import annotations

import json

import pytest

from orders.orders import order_cancel
from payments.models import Credit, Notice
from shop.personal_data import ErasureRefused, order_personal_data_erase
from tests.payments.verification.helpers import order_of, payment_of, units
from tests.payments.verification.test_payment_review import ORDERS_ADMIN
from tests.staff import STAFF_PASSWORD, add_staff


@pytest.fixture
def paid_then_cancelled(chain, customer, scan_pass) -> dict:
    """An order paid on-chain with "I have paid", then cancelled (refunded) by staff."""
    placed = customer.order(first_name="Émile", last_name="Zola <b>", email="emile@example.org")
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    customer.paid(placed, sent.tx_hash)
    chain.mine(3)
    scan_pass()
    assert order_of(placed).status == "paid"
    order_cancel(order_id=order_of(placed).pk, actor="admin", reason="refunded on request")
    return {**placed, "tx_hash": sent.tx_hash.lower()}


def test_a_reviewer_exports_an_orders_personal_data_as_json(paid_then_cancelled, reviewer, client):
    client.login(username=reviewer.username, password=STAFF_PASSWORD)
    order = order_of(paid_then_cancelled)

    response = client.post(ORDERS_ADMIN, {"action": "export_personal_data", "_selected_action": [order.pk]})

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="personal-data.json"'
    (document,) = json.loads(response.content)["orders"]
    assert document["reference"] == paid_then_cancelled["reference"]
    assert document["contact"]["email"] == "emile@example.org"
    assert document["contact"]["last_name"] == "Zola <b>"
    assert document["ssh_public_key"] == order.ssh_public_key
    assert document["payment"]["credits"][0]["tx_hash"] == paid_then_cancelled["tx_hash"]
    assert document["payment"]["notices"][0]["tx_hash"] == paid_then_cancelled["tx_hash"]


def test_a_reviewer_erases_personal_data_with_a_reason_and_the_payment_evidence_stays(
    paid_then_cancelled, reviewer, client
):
    client.login(username=reviewer.username, password=STAFF_PASSWORD)
    order = order_of(paid_then_cancelled)
    form = {"action": "erase_personal_data", "_selected_action": [order.pk]}

    asked = client.post(ORDERS_ADMIN, form)
    assert asked.status_code == 200 and b"Erase personal data" in asked.content  # a reason first
    assert order_of(paid_then_cancelled).email == "emile@example.org"

    done = client.post(ORDERS_ADMIN, {**form, "reason": "customer's request of 2 December"}, follow=True)

    assert f"{order.reference}: personal data erased".encode() in done.content
    erased = order_of(paid_then_cancelled)
    assert (erased.first_name, erased.last_name, erased.ssh_public_key, erased.hypothesis_text) == (
        "erased",
        "erased",
        "",
        "",
    )
    assert erased.email == f"erased-{order.reference.lower()}@invalid"
    assert erased.personal_data_erased_at is not None
    assert erased.events.last().reason == "personal data erased: customer's request of 2 December"
    assert erased.events.last().actor == "rita"
    # The evidence reviewers and accountants need is untouched
    payment = payment_of(paid_then_cancelled)
    assert list(Credit.objects.filter(payment=payment).values_list("tx_hash", "amount_base_units")) == [
        (paid_then_cancelled["tx_hash"], units(paid_then_cancelled))
    ]
    assert Notice.objects.filter(payment=payment).count() == 1
    assert payment.address == paid_then_cancelled["payment"]["address"]
    assert (erased.reference, erased.total_usd, erased.status) == (order.reference, order.total_usd, "cancelled")


def test_an_order_still_in_progress_cannot_be_erased_and_keeps_its_contact(chain, customer):
    placed = customer.order()

    with pytest.raises(ErasureRefused, match="cancel it, or wait until it has ended"):
        order_personal_data_erase(order_id=order_of(placed).pk, actor="rita", reason="customer's request")

    assert order_of(placed).email == customer.order_payload["email"]
    assert order_of(placed).personal_data_erased_at is None


def test_an_operator_can_neither_export_nor_erase_personal_data(paid_then_cancelled, client):
    operator = add_staff("otto", "operator")
    client.login(username=operator.username, password=STAFF_PASSWORD)
    order = order_of(paid_then_cancelled)

    for action in ("export_personal_data", "erase_personal_data"):
        response = client.post(
            ORDERS_ADMIN, {"action": action, "_selected_action": [order.pk], "reason": "x"}, follow=True
        )
        assert response.status_code == 200
        assert not response.get("Content-Disposition")
    assert order_of(paid_then_cancelled).email == "emile@example.org"
