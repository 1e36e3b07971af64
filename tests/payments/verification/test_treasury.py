"""The treasury plan and the ledger, read on a real chain (anvil) with real tokens: what the signer will pay
back and sweep is exactly what the addresses hold, minus what is owed, and only treasurers see the plan."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from payments.addresses import derive_address
from payments.models import Refund
from payments.treasury import gas_account_address
from tests.api_answers import error_fields
from tests.payments.verification.helpers import payment_of, units
from tests.payments.verification.money_out import (
    CUSTOMER_WALLET,
    EXCESS,
    TREASURY,
    ledger_csv_rows,
    refund_approved,
    staff,
)


def get(client, url: str, token: str | None):
    return client.get(url, headers={"Authorization": f"Token {token}"} if token else {})


@pytest.fixture
def treasury_set(settings):
    settings.TREASURY_ADDRESS = TREASURY
    return TREASURY


def test_the_plan_pays_approved_refunds_sweeps_the_rest_and_leaves_what_is_not_final_or_not_decided(
    chain, customer, scan_pass, client, treasury_set
):
    # Given an overpaid order whose refund is approved, a paid order, an overpaid order whose refund still waits
    # for its address, and an order whose transfer is not final yet
    reviewer, treasurer = staff("reviewer", "rita"), staff("treasurer", "tom")
    overpaid = customer.order()
    chain.wallet.pay_token(chain.usdc, overpaid["payment"]["address"], units(overpaid) + EXCESS)
    paid = customer.order()
    chain.wallet.pay_token(chain.usdc, paid["payment"]["address"], units(paid))
    waiting = customer.order()
    chain.wallet.pay_token(chain.usdc, waiting["payment"]["address"], units(waiting) + EXCESS)
    chain.mine(1)
    scan_pass()
    unconfirmed = customer.order()
    chain.wallet.pay_token(chain.usdc, unconfirmed["payment"]["address"], units(unconfirmed))
    scan_pass()  # seen, not final
    refund = refund_approved(client, overpaid, Refund.objects.get(payment=payment_of(overpaid)), reviewer)

    # When the treasurer asks for the local network's plan
    answer = get(client, "/api/v1/treasury/plan/?network=local", treasurer)

    # Then each address is planned from its balance on-chain now: the approved refund first, the rest swept;
    # the open refund's amount stays on its address; the unconfirmed order is not in the plan
    assert answer.status_code == 200, answer.content
    plan = answer.json()
    assert (plan["network"], plan["chain_id"], plan["treasury"]) == ("local", 31337, TREASURY)
    items = {item["order"]: item for item in plan["items"]}
    assert set(items) == {overpaid["reference"], paid["reference"], waiting["reference"]}
    first = items[overpaid["reference"]]
    assert first["refunds"] == [{"id": refund.pk, "to_address": CUSTOMER_WALLET, "amount_base_units": EXCESS}]
    assert (first["balance_base_units"], first["sweep_base_units"]) == (units(overpaid) + EXCESS, units(overpaid))
    assert (items[paid["reference"]]["sweep_base_units"], items[paid["reference"]]["refunds"]) == (units(paid), [])
    assert items[waiting["reference"]]["sweep_base_units"] == units(waiting)  # the excess waits for its decision
    for reference, item in items.items():
        payment = payment_of({"reference": reference})
        assert item["address"] == derive_address(payment.derivation_index) == payment.address
        assert item["derivation_path"] == f"m/44'/60'/0'/0/{payment.derivation_index}"
        assert (item["asset"], item["contract"]) == ("USDC", chain.usdc)
    # And the gas it needs, from the gas account the server can name but not spend from
    assert plan["gas_account"] == gas_account_address() and plan["gas_account_path"] == "m/44'/60'/0'/1/0"
    # one refund and three sweeps of a token, and a gas top-up for each of the three addresses
    assert plan["gas_estimate_wei"] == (4 * 65_000 + 3 * 21_000) * plan["gas_price_wei"]


def test_without_a_treasury_address_only_refunds_are_planned(chain, customer, scan_pass, client, settings):
    settings.TREASURY_ADDRESS = ""
    reviewer, treasurer = staff("reviewer", "rita"), staff("treasurer", "tom")
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) + EXCESS)
    chain.mine(1)
    scan_pass()
    refund_approved(client, placed, Refund.objects.get(payment=payment_of(placed)), reviewer)

    plan = get(client, "/api/v1/treasury/plan/?network=local", treasurer).json()

    assert plan["treasury"] is None
    assert [(i["sweep_base_units"], len(i["refunds"])) for i in plan["items"]] == [(0, 1)]


def test_only_treasurers_see_the_plan_and_only_treasurers_and_reviewers_the_ledger(db, client):
    tokens = {role: staff(role, f"{role[:3]}x") for role in ("treasurer", "reviewer", "operator")}
    assert get(client, "/api/v1/treasury/plan/?network=local", None).status_code in (401, 403)
    assert get(client, "/api/v1/treasury/plan/?network=local", tokens["reviewer"]).status_code == 403
    assert get(client, "/api/v1/treasury/plan/?network=local", tokens["operator"]).status_code == 403
    unknown = get(client, "/api/v1/treasury/plan/?network=nowhere", tokens["treasurer"])
    assert unknown.status_code == 400 and "network" in error_fields(unknown, "invalid")
    assert get(client, "/api/v1/treasury/ledger.csv", None).status_code in (401, 403)
    assert get(client, "/api/v1/treasury/ledger.csv", tokens["operator"]).status_code == 403
    for role in ("treasurer", "reviewer"):
        assert get(client, "/api/v1/treasury/ledger.csv", tokens[role]).status_code == 200
    bad = get(client, "/api/v1/treasury/ledger.csv?from=yesterday", tokens["reviewer"])
    assert bad.status_code == 400 and error_fields(bad, "invalid") == {"from": ["A day is written YYYY-MM-DD."]}


def test_the_ledger_lists_every_credit_with_its_value_at_the_quote(chain, customer, scan_pass, client):
    reviewer = staff("reviewer", "rita")
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) + EXCESS)
    stray = chain.wallet.pay_token(chain.usdt, placed["payment"]["address"], 3_000_000)
    chain.mine(1)
    scan_pass()

    answer = get(client, "/api/v1/treasury/ledger.csv", reviewer)

    assert answer["Content-Type"].startswith("text/csv")
    rows = ledger_csv_rows(answer)
    by_tx = {row["tx_hash"]: row for row in rows}
    usdc = by_tx[sent.tx_hash.lower()]
    assert (usdc["kind"], usdc["order"], usdc["asset"]) == ("credit", placed["reference"], "USDC")
    assert usdc["amount_base_units"] == str(units(placed) + EXCESS)
    assert usdc["usd_value_at_quote"] == f"{(units(placed) + EXCESS) / 10**6:.2f}"
    assert (usdc["from_address"].lower(), usdc["to_address"].lower()) == (
        chain.wallet.address.lower(),
        placed["payment"]["address"].lower(),
    )
    usdt = by_tx[stray.tx_hash.lower()]
    assert (usdt["asset"], usdt["amount"], usdt["usd_value_at_quote"]) == ("USDT", "3", "")  # not the quote's asset
    # A day range that excludes them: the header alone
    empty = get(client, "/api/v1/treasury/ledger.csv?from=2000-01-01&to=2000-01-02", reviewer)
    assert ledger_csv_rows(empty) == []


def test_the_admins_ledger_page_filters_the_same_rows_for_reviewers_only(chain, customer, scan_pass, client):
    from django.contrib.auth import get_user_model

    staff("reviewer", "rita")
    staff("operator", "olga")
    placed = customer.order()
    sent = chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()

    client.force_login(get_user_model().objects.get(username="olga"))
    assert client.get("/admin/ledger/").status_code == 403
    client.force_login(get_user_model().objects.get(username="rita"))
    page = client.get("/admin/ledger/?kind=credit&network=local").content.decode()
    assert sent.tx_hash.lower() in page and placed["reference"] in page
    assert sent.tx_hash.lower() not in client.get("/admin/ledger/?kind=refund").content.decode()


def two_paid(chain, customer, scan_pass) -> tuple[dict, dict]:
    """Two orders paid in USDC, their transfers credited."""
    first, second = customer.order(), customer.order()
    for placed in (first, second):
        chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.mine(1)
    scan_pass()
    return first, second


def test_the_ledger_filters_by_kind_and_network_in_the_csv_and_pages_the_admin_view(
    chain, customer, scan_pass, client, monkeypatch
):
    from django.contrib.auth import get_user_model

    reviewer = staff("reviewer", "rita")
    two_paid(chain, customer, scan_pass)

    def rows(query: str) -> list[dict]:
        answer = get(client, f"/api/v1/treasury/ledger.csv?{query}", reviewer)
        return ledger_csv_rows(answer)

    assert [row["kind"] for row in rows("kind=credit&network=local")] == ["credit", "credit"]
    assert rows("kind=refund") == [] and rows("network=base") == []
    bad = get(client, "/api/v1/treasury/ledger.csv?kind=theft", reviewer)
    assert bad.status_code == 400 and "kind" in bad.json()

    # The admin page shows one page at a time, its links keep the filters
    monkeypatch.setattr("payments.ledger_views.PER_PAGE", 1)
    client.force_login(get_user_model().objects.get(username="rita"))
    page = client.get("/admin/ledger/?kind=credit").content.decode()
    assert "page 1 of 2 (2 movements)" in page and "?kind=credit&amp;page=2" in page
    assert "page 2 of 2" in client.get("/admin/ledger/?kind=credit&page=2").content.decode()


def test_the_admins_ledger_page_totals_the_filtered_rows_per_asset_and_kind_in_units(
    chain, customer, scan_pass, client, monkeypatch
):
    import re

    from django.contrib.auth import get_user_model

    from core.amounts import units_text

    # Given two orders paid in USDC, one of them with 3 USDT beside, the page one row long
    staff("treasurer", "tom")
    first, second = customer.order(), customer.order()
    for placed in (first, second):
        chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.wallet.pay_token(chain.usdt, second["payment"]["address"], 3_000_000)
    chain.mine(1)
    scan_pass()
    monkeypatch.setattr("payments.ledger_views.PER_PAGE", 1)
    client.force_login(get_user_model().objects.get(username="tom"))

    # When the treasurer opens the ledger
    page = client.get("/admin/ledger/").content.decode()

    # Then the totals count every row the filters keep (not only the page's), per asset and kind, in units
    totals = page.split('id="ledger-totals"', 1)[1].split("</table>", 1)[0]
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", totals, re.S)]
    usdc = units_text(units(first) + units(second), 6, "USDC")
    assert cells == ["local", "USDC", "credit", "2", usdc, "local", "USDT", "credit", "1", "3.00 USDT"]
    # And the rows' amounts are in units with their symbol, never in base units alone
    rows = page.split('id="ledger"', 1)[1].split("</table>", 1)[0]
    assert units_text(units(first), 6, "USDC") in rows and str(units(first)) not in rows
    # And a filter narrows the totals with the rows
    usdt_only = client.get("/admin/ledger/?kind=credit&network=base").content.decode()
    assert "No movement in this range." in usdt_only.split('id="ledger-totals"', 1)[1].split("</table>", 1)[0]


def test_the_csv_streams_the_last_month_by_default_and_older_movements_on_request(
    chain, customer, scan_pass, client, monkeypatch
):
    from django.contrib.auth import get_user_model

    from payments.models import Credit

    # Given two payments, one of them received 40 days ago
    reviewer = staff("reviewer", "rita")
    old, recent = two_paid(chain, customer, scan_pass)
    long_ago = timezone.now() - dt.timedelta(days=40)
    Credit.objects.filter(payment=payment_of(old)).update(block_timestamp=long_ago)

    # When the CSV is asked for with no range: the last month only, streamed
    default = ledger_csv_rows(get(client, "/api/v1/treasury/ledger.csv", reviewer))
    assert [row["order"] for row in default] == [recent["reference"]]

    # And a range that reaches back finds the old one, oldest first
    since = get(client, f"/api/v1/treasury/ledger.csv?from={long_ago.date().isoformat()}", reviewer)
    assert [row["order"] for row in ledger_csv_rows(since)] == [old["reference"], recent["reference"]]

    # The admin page (no range: every movement) pages them oldest first, with totals over both
    monkeypatch.setattr("payments.ledger_views.PER_PAGE", 1)
    client.force_login(get_user_model().objects.get(username="rita"))
    first, second = (client.get(f"/admin/ledger/?page={n}").content.decode() for n in (1, 2))
    assert old["reference"] in first and recent["reference"] not in first.split('id="ledger"', 1)[1]
    assert recent["reference"] in second.split('id="ledger"', 1)[1]
    assert "page 1 of 2 (2 movements)" in first
