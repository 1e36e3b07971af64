"""/ops/ "Needs attention": one list, oldest first, of what waits on the person's role, each with its age and a
link to where it is handled, and what waits on other roles counted with who acts; each item leaves the list once
handled. The money is real (anvil): a paid order,
a short payment, an overpayment whose refund waits for approval, money taken with the deposit key."""

from __future__ import annotations

import datetime as dt
import re

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from orders.models import Order, OrderEvent, OrderStatus
from orders.orders import order_transition
from payments.models import UnexpectedOutflow
from payments.review import payment_review_decide
from provisioning.models import NodeEvent, NodeState
from provisioning.states import node_state_set, nodes_transition
from tests.payments.verification.deposit_keys import STRANGER, deposit_wallet, known_keys  # noqa: F401 - autouse fixture
from tests.payments.verification.helpers import order_of, pay, payment_of, units
from tests.payments.verification.money_out import CUSTOMER_WALLET, decide, give_address, overpaid, staff

S = OrderStatus


def attention(client) -> list[tuple[str, str, str]]:
    """The list as the page shows it: (kind, which, link) per row, top to bottom."""
    page = client.get("/ops/")
    assert page.status_code == 200
    html = page.content.decode()
    table = html.split('id="needs-attention"', 1)[1].split("</table>", 1)[0] if 'id="needs-attention"' in html else ""
    rows = re.findall(r'<tr data-kind="([a-z_]+)">.*?<code>([^<]+)</code>.*?<a href="([^"]+)">Handle</a>', table, re.S)
    return rows


def backdate(model, hours: int, **filters) -> None:
    model.objects.filter(**filters).update(created_at=timezone.now() - dt.timedelta(hours=hours))


def test_everything_waiting_on_a_person_is_listed_oldest_first_and_leaves_once_handled(
    chain, customer, scan_pass, client
):
    # Given: a paid order; a short payment in review; an overpayment whose refund waits for approval; money
    # taken from the paid order's address; a preparation that failed; a failed node and one in maintenance
    paid = pay(chain, customer, scan_pass)
    short = pay(chain, customer, scan_pass, short_by=1)
    over, refund = overpaid(chain, customer, scan_pass)
    assert give_address(client, over, refund.pk, CUSTOMER_WALLET).status_code == 200
    deposit_wallet(chain, paid).transfer(chain.usdc, STRANGER, units(paid))
    scan_pass()
    failed = Order.objects.get(reference=over["reference"])
    with transaction.atomic():
        order_transition(order=failed, to=S.PREPARING, actor="olga", reason="preparation triggered")
        order_transition(order=failed, to=S.PREPARATION_FAILED, actor="system", reason="gpu-9: memory_balance")
    broken = customer.make_node(name="gpu-broken", state=NodeState.PREPARING)
    resting = customer.make_node(name="gpu-resting")
    with transaction.atomic():
        nodes_transition(node_ids=[broken.pk], to=NodeState.FAILED, actor="system", reason="preflight: failed")
    node_state_set(node_id=resting.pk, to=NodeState.MAINTENANCE, actor="olga", reason="new fans")
    # ... waiting since different times (the order the list must follow, whatever the kind)
    backdate(NodeEvent, 50, node=resting, to_state=NodeState.MAINTENANCE)
    backdate(OrderEvent, 40, order=order_of(short), to_status=S.NEEDS_REVIEW)
    backdate(UnexpectedOutflow, 30)
    backdate(OrderEvent, 20, order=order_of(paid), to_status=S.PAID)
    backdate(OrderEvent, 10, order=failed, to_status=S.PREPARATION_FAILED)
    staff("operator", "olga")
    client.force_login(get_user_model().objects.get(username="olga"))

    # When an operator opens the console
    rows = attention(client)

    # Then every kind an operator acts on is there, oldest first, each linking to where it is handled
    assert rows == [
        ("node", resting.name, f"/admin/fleet/node/{resting.pk}/change/"),
        ("outflow", paid["reference"], "/ops/#outflows-title"),
        ("paid", paid["reference"], "/ops/#waiting-title"),
        ("preparation_failed", over["reference"], "/ops/#failed-title"),
        ("node", broken.name, f"/admin/fleet/node/{broken.pk}/change/"),
    ]
    # And what waits on the payment reviewers (the short payment, the refund) is counted, naming them, unlinked
    assert "2 items for Payment reviewers" in client.get("/ops/").content.decode()
    # And a superuser sees every kind, the reviewers' too, in the same order
    root = get_user_model().objects.create_superuser("root", "root@example.org", "a-long-admin-password")
    client.force_login(root)
    assert attention(client) == [
        rows[0],
        ("review", short["reference"], f"/admin/payments/paymentrequest/{payment_of(short).pk}/change/"),
        *rows[1:4],
        ("refund", over["reference"], f"/admin/payments/refund/{refund.pk}/change/"),
        rows[4],
    ]
    client.force_login(get_user_model().objects.get(username="olga"))
    page = client.get("/ops/").content.decode()
    assert re.search(r"2\xa0days|2 days", page)  # the age of the oldest, in words

    # When each is handled where the link leads
    node_state_set(node_id=resting.pk, to=NodeState.AVAILABLE, actor="olga", reason="fans replaced")
    node_state_set(node_id=broken.pk, to=NodeState.AVAILABLE, actor="olga", reason="reseated the cards")
    payment_review_decide(payment_id=payment_of(short).pk, decision="accept", reason="short by dust", reviewer="rita")
    outflow = UnexpectedOutflow.objects.get()
    assert client.post(f"/ops/outflows/{outflow.pk}/acknowledge/").status_code == 302
    client.logout()  # the reviewer decides with their own API token
    assert decide(client, refund.pk, "approve", staff("reviewer", "rita")).status_code == 200
    client.force_login(get_user_model().objects.get(username="olga"))
    with transaction.atomic():
        order_transition(order=order_of(paid), to=S.PREPARING, actor="olga", reason="preparation triggered")
        failed.refresh_from_db()
        order_transition(order=failed, to=S.CANCELLED, actor="olga", reason="cannot be prepared")

    # Then only what still waits remains: the accepted short payment is paid now, waiting for its preparation;
    # the approved refund waits on the treasurers' signer, counted for them
    assert [(kind, which) for kind, which, _link in attention(client)] == [("paid", short["reference"])]
    assert "1 item for Treasurers" in client.get("/ops/").content.decode()


def test_a_reviewer_opening_the_console_is_told_who_acts_there_and_where_their_own_work_is(db, client):
    # Given a payment reviewer and a treasurer
    for role, name in (("reviewer", "rita"), ("treasurer", "tom")):
        staff(role, name)
        client.force_login(get_user_model().objects.get(username=name))

        # When they open the operator console
        page = client.get("/ops/")

        # Then it is refused, with a page naming the operators and linking their own work
        html = page.content.decode()
        assert page.status_code == 403
        assert "Operators" in html
        assert 'href="/admin/ledger/"' in html
        assert ('href="/admin/"' in html) == (role == "reviewer")
        # and it says who is signed in, with the way to log out (the wrong account is the first thing to rule out)
        assert f"Signed in as {name}." in html
        assert re.search(r'<form[^>]*method="post"[^>]*action="/admin/logout/"', html)
        assert 'name="csrfmiddlewaretoken"' in html
