"""A reviewer approves the address they saw, not one the link holder put there afterwards: the approval names
it (API `to_address`, a hidden field of the admin's confirmation page) and is refused if it changed. On a real
chain (anvil), the customer's side through the order API, the reviewer's through the API and the admin."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from payments.models import Refund
from tests.payments.verification.money_out import CUSTOMER_WALLET, decide, give_address, overpaid, staff

ATTACKER = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"  # checksummed, a wallet the link holder controls


def test_an_address_changed_after_the_reviewer_saw_it_is_not_approved_through_the_api(
    chain, customer, scan_pass, client
):
    # Given a refund waiting for approval with the customer's address, and a reviewer who loaded it
    placed, refund = overpaid(chain, customer, scan_pass)
    assert give_address(client, placed, refund.pk, CUSTOMER_WALLET).status_code == 200
    reviewer = staff("reviewer", "rita")
    seen = Refund.objects.get(pk=refund.pk).to_address

    # When the link holder changes the address, then the reviewer approves what they saw
    assert give_address(client, placed, refund.pk, ATTACKER).status_code == 200
    refused = decide(client, refund.pk, "approve", reviewer, to_address=seen)

    # Then the approval is refused, in words, and nothing is approved: the refund still waits, with its history
    assert refused.status_code == 409, refused.content
    assert "address changed" in refused.json()["detail"] and ATTACKER in refused.json()["detail"]
    refund.refresh_from_db()
    assert (refund.status, refund.to_address, refund.decided_by) == ("pending_approval", ATTACKER, "")
    assert not refund.events.filter(to_status="approved").exists()

    # And approving the address now shown is taken
    approved = decide(client, refund.pk, "approve", reviewer, to_address=ATTACKER)
    assert approved.status_code == 200 and approved.json() == {"id": refund.pk, "status": "approved"}


def test_an_approval_that_names_no_address_is_a_400_on_the_field(chain, customer, scan_pass, client):
    placed, refund = overpaid(chain, customer, scan_pass)
    give_address(client, placed, refund.pk, CUSTOMER_WALLET)
    answer = client.post(
        f"/api/v1/refunds/{refund.pk}/approve/",
        {"reason": "checked"},
        content_type="application/json",
        headers={"Authorization": f"Token {staff('reviewer', 'rita')}"},
    )
    assert answer.status_code == 400 and "to_address" in answer.json()
    assert Refund.objects.get(pk=refund.pk).status == "pending_approval"


def test_an_address_changed_while_the_admin_confirmation_page_was_open_is_not_approved(
    chain, customer, scan_pass, client
):
    # Given a refund waiting for approval, and a reviewer on the admin's confirmation page for it
    placed, refund = overpaid(chain, customer, scan_pass)
    give_address(client, placed, refund.pk, CUSTOMER_WALLET)
    staff("reviewer", "rita")
    client.force_login(get_user_model().objects.get(username="rita"))
    action = {"action": "approve", "_selected_action": [refund.pk]}
    page = client.post("/admin/payments/refund/", action).content.decode()
    field = f'name="to_address_{refund.pk}" value="{CUSTOMER_WALLET}"'
    assert field in page and 'type="hidden"' in page  # the address shown travels with the approval

    # When the link holder changes the address, then the reviewer confirms the page they had
    assert give_address(client, placed, refund.pk, ATTACKER).status_code == 200
    sent = {**action, "reason": "checked", f"to_address_{refund.pk}": CUSTOMER_WALLET}
    answer = client.post("/admin/payments/refund/", sent, follow=True).content.decode()

    # Then it is refused with a message, and the refund still waits
    said = f"Refund {refund.pk}: The refund&#x27;s address changed to {ATTACKER} after you saw {CUSTOMER_WALLET}"
    assert said in answer
    assert Refund.objects.get(pk=refund.pk).status == "pending_approval"

    # And confirming a page that shows the new address approves it
    page = client.post("/admin/payments/refund/", action).content.decode()
    assert f'name="to_address_{refund.pk}" value="{ATTACKER}"' in page
    client.post("/admin/payments/refund/", {**sent, f"to_address_{refund.pk}": ATTACKER}, follow=True)
    assert Refund.objects.get(pk=refund.pk).status == "approved"
