"""What the refund, treasury and money-out tests share: staff with a DRF token, the customer's refund address
given and decided through the API, and the addresses money goes to."""

from __future__ import annotations

import csv
import io

from django.core.management import call_command
from rest_framework.authtoken.models import Token

from payments.models import Refund
from payments.rpc import RpcClient
from tests.payments.verification.helpers import ORDERS_URL, payment_of, units

CUSTOMER_WALLET = "0x52908400098527886E0F7030069857D2E4169EE7"  # EIP-55's own example, checksummed
TREASURY = "0x8ba1f109551bD432803012645Ac136ddd64DBA72"
EXCESS = 2_500_000  # 2.5 USDC


def staff(role: str, name: str) -> str:
    """A staff account in `role` (manage.py add_staff), and its API token."""
    from django.contrib.auth import get_user_model

    call_command("add_staff", name, "--role", role, "--password", f"a-long-{role}-password")
    return Token.objects.create(user=get_user_model().objects.get(username=name)).key


def overpaid(chain, customer, scan_pass) -> tuple[dict, Refund]:
    """An order overpaid by EXCESS USDC, final: its refund is open, waiting for the address."""
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) + EXCESS)
    chain.mine(1)
    scan_pass()
    return placed, Refund.objects.get(payment=payment_of(placed))


def give_address(client, placed: dict, refund_id: int, address: str, token: str | None = None):
    return client.post(
        f"{ORDERS_URL}{placed['reference']}/refunds/{refund_id}/address/",
        {"address": address},
        content_type="application/json",
        headers={"X-Order-Token": token or placed["access_token"]},
    )


def decide(
    client,
    refund_id: int,
    verb: str,
    token: str | None,
    reason: str = "checked the transfer",
    to_address: str | None = None,
):
    """A reviewer's decision through the API. An approval names the address the reviewer saw: by default the
    refund's address now."""
    headers = {"Authorization": f"Token {token}"} if token else {}
    body = {"reason": reason}
    if verb == "approve":
        now = Refund.objects.filter(pk=refund_id).values_list("to_address", flat=True).first()
        body["to_address"] = to_address if to_address is not None else (now or "")
    return client.post(f"/api/v1/refunds/{refund_id}/{verb}/", body, content_type="application/json", headers=headers)


def refund_approved(client, placed: dict, refund: Refund, reviewer: str) -> Refund:
    """The customer gives CUSTOMER_WALLET, a reviewer approves: both through the API, both answered 200."""
    given = give_address(client, placed, refund.pk, CUSTOMER_WALLET)
    assert given.status_code == 200, given.content
    approved = decide(client, refund.pk, "approve", reviewer)
    assert approved.status_code == 200, approved.content
    return refund


def balance(url: str, token: str | None, address: str) -> int:
    client = RpcClient([url])
    if token is None:
        return int(client.call("eth_getBalance", [address, "latest"]), 16)
    data = "0x70a08231" + address.lower()[2:].rjust(64, "0")
    return int(client.call("eth_call", [{"to": token, "data": data}, "latest"]), 16)


def ledger_csv_rows(answer) -> list[dict]:
    """The rows of a ledger CSV answer, which is streamed (never built whole in memory)."""
    assert answer.status_code == 200 and answer.streaming, answer
    return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
