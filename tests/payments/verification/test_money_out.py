"""Money out, end to end on a real chain: an overpayment refunded and every paid order swept to the treasury
by the treasurer's signer (a subprocess with the mnemonic the server never sees), from the plan the server
made; every balance checked on-chain afterwards, to the base unit."""

from __future__ import annotations

import json

from django.core import mail

from payments.models import Refund, Sweep, UnexpectedOutflow
from payments.treasury import gas_account_address
from tests.payments.signer.chain import run_signer
from tests.payments.verification.helpers import payment_of, units
from tests.payments.verification.money_out import (
    CUSTOMER_WALLET,
    EXCESS,
    TREASURY,
    balance,
    ledger_csv_rows,
    refund_approved,
    staff,
)

STRAY_USDT = 3_000_000


def test_an_overpayment_is_refunded_and_every_paid_order_swept_with_exact_balances_on_chain(
    treasurers_key, chain, customer, scan_pass, client, tmp_path
):
    reviewer, treasurer = staff("reviewer", "rita"), staff("treasurer", "tom")
    # Given an order overpaid by 2.5 USDC, an order paid exactly, and one paid exactly plus 3 USDT by mistake
    overpaid, paid, stray = customer.order(), customer.order(), customer.order()
    chain.wallet.pay_token(chain.usdc, overpaid["payment"]["address"], units(overpaid) + EXCESS)
    chain.wallet.pay_token(chain.usdc, paid["payment"]["address"], units(paid))
    chain.wallet.pay_token(chain.usdc, stray["payment"]["address"], units(stray))
    chain.wallet.pay_token(chain.usdt, stray["payment"]["address"], STRAY_USDT)
    chain.mine(2)
    scan_pass()
    # And both refunds given the customer's address and approved by a reviewer
    excess_refund = Refund.objects.get(payment=payment_of(overpaid))
    usdt_refund = Refund.objects.get(payment=payment_of(stray))
    assert (usdt_refund.reason, usdt_refund.symbol) == ("wrong_asset", "USDT")
    refund_approved(client, overpaid, excess_refund, reviewer)
    refund_approved(client, stray, usdt_refund, reviewer)
    # And gas for the run in the gas account the plan names
    gas_account = gas_account_address()
    chain.wallet.pay_native(gas_account, 10**18)

    # When the treasurer downloads the plan and runs the signer with it on their own machine
    plan = client.get("/api/v1/treasury/plan/?network=local", headers={"Authorization": f"Token {treasurer}"})
    assert plan.status_code == 200, plan.content
    assert plan.json()["gas_account"] == gas_account
    (tmp_path / "plan.json").write_text(json.dumps(plan.json()))
    done = run_signer(
        tmp_path / "plan.json",
        treasurers_key,
        chain.node.url,
        "--json",
        str(tmp_path / "run.json"),
        directory=tmp_path,
        treasury=TREASURY,
    )

    # Then every transfer was mined
    assert done.returncode == 0, done.stdout + done.stderr
    sent = json.loads((tmp_path / "run.json").read_text())
    print("\n" + done.stdout)
    # And the balances on-chain are exact: the customer got the excess in USDC and the stray USDT in USDT;
    # the treasury got the three orders' quotes (the stray USDT beside a full USDC payment does not hold the
    # order up: it is paid, and the USDT is due back apart); the swept addresses hold no token
    url = chain.node.url
    assert balance(url, chain.usdc, CUSTOMER_WALLET) == EXCESS
    assert balance(url, chain.usdt, CUSTOMER_WALLET) == STRAY_USDT
    assert balance(url, chain.usdc, TREASURY) == units(overpaid) + units(paid) + units(stray)
    assert balance(url, chain.usdc, overpaid["payment"]["address"]) == 0
    assert balance(url, chain.usdc, paid["payment"]["address"]) == 0
    assert balance(url, chain.usdt, stray["payment"]["address"]) == 0
    assert balance(url, chain.usdc, stray["payment"]["address"]) == 0
    # And once the transfers are final, the scan sees them: both refunds confirmed (each customer emailed once),
    # both sweeps recorded, nothing unexpected (the gas top-ups came in, the fees are not outflows)
    chain.mine(3)
    scan_pass()
    scan_pass()
    assert set(Refund.objects.values_list("status", flat=True)) == {"confirmed"}
    assert {r.tx_hash for r in Refund.objects.all()} == {t["tx_hash"] for t in sent if t["kind"] == "refund"}
    swept = sorted(int(s.amount_base_units) for s in Sweep.objects.all())
    assert swept == sorted([units(overpaid), units(paid), units(stray)])
    assert not UnexpectedOutflow.objects.exists()
    confirmed = [m.subject for m in mail.outbox if "your refund is confirmed" in m.subject]
    assert sorted(confirmed) == sorted(f"Order {p['reference']}: your refund is confirmed" for p in (overpaid, stray))
    # And the books show every movement: four credits and four gas top-ups in (one per token item), two refunds
    # and three sweeps out
    ledger = client.get("/api/v1/treasury/ledger.csv", headers={"Authorization": f"Token {treasurer}"})
    rows = ledger_csv_rows(ledger)
    kinds = [row["kind"] for row in rows]
    assert sorted(kinds) == ["credit"] * 4 + ["gas"] * 4 + ["refund"] * 2 + ["sweep"] * 3
    # And each movement says where it came from and went to: the customer's wallet (and the gas account) to the
    # deposit addresses; the deposit addresses to the customer's refund address and to the treasury
    deposits = {placed["payment"]["address"].lower() for placed in (overpaid, paid, stray)}
    ends = {
        kind: {(row["from_address"].lower(), row["to_address"].lower()) for row in rows if row["kind"] == kind}
        for kind in ("credit", "gas", "refund", "sweep")
    }
    assert ends["credit"] == {(chain.wallet.address.lower(), deposit) for deposit in deposits}
    assert {to for _sender, to in ends["gas"]} <= deposits and {s for s, _to in ends["gas"]} == {gas_account.lower()}
    assert ends["refund"] == {
        (overpaid["payment"]["address"].lower(), CUSTOMER_WALLET.lower()),
        (stray["payment"]["address"].lower(), CUSTOMER_WALLET.lower()),
    }
    assert ends["sweep"] == {(deposit, TREASURY.lower()) for deposit in deposits}
    # And a second run sends nothing more
    again = run_signer(
        tmp_path / "plan.json",
        treasurers_key,
        url,
        "--json",
        str(tmp_path / "run.json"),
        directory=tmp_path,
        treasury=TREASURY,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert balance(url, chain.usdc, TREASURY) == units(overpaid) + units(paid) + units(stray)
    assert len(sent) >= 4


def test_two_equal_refunds_to_the_same_wallet_are_both_paid_and_each_confirmed_by_its_own_transfer(
    treasurers_key, chain, customer, scan_pass, client, tmp_path
):
    from payments.refunds import refund_goodwill_open

    reviewer, treasurer = staff("reviewer", "rita"), staff("treasurer", "tom")
    # Given an order overpaid by 2.5 USDC, and a goodwill refund of the same 2.5 USDC, both to the same wallet
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed) + EXCESS)
    chain.mine(1)
    scan_pass()
    excess = Refund.objects.get(payment=payment_of(placed))
    goodwill = refund_goodwill_open(
        payment_id=payment_of(placed).pk, amount_base_units=EXCESS, reviewer="rita", reason="a slow hand-over"
    )
    refund_approved(client, placed, excess, reviewer)
    refund_approved(client, placed, goodwill, reviewer)
    chain.wallet.pay_native(gas_account_address(), 10**18)

    # When the treasurer runs the signer on the plan
    plan = client.get("/api/v1/treasury/plan/?network=local", headers={"Authorization": f"Token {treasurer}"})
    (tmp_path / "plan.json").write_text(json.dumps(plan.json()))
    done = run_signer(tmp_path / "plan.json", treasurers_key, chain.node.url, directory=tmp_path, treasury=TREASURY)
    assert done.returncode == 0, done.stdout + done.stderr

    # Then the wallet got both (not one taken for the other), the treasury the rest
    url = chain.node.url
    assert balance(url, chain.usdc, CUSTOMER_WALLET) == 2 * EXCESS
    assert balance(url, chain.usdc, TREASURY) == units(placed) - EXCESS
    # And once final, each refund is confirmed by a transfer of its own, and nothing is unexpected
    chain.mine(3)
    scan_pass()
    scan_pass()
    confirmed = Refund.objects.filter(status="confirmed")
    assert confirmed.count() == 2 and len({r.tx_hash for r in confirmed}) == 2
    assert not UnexpectedOutflow.objects.exists()


def test_a_token_the_shop_does_not_sell_is_paid_back_in_that_token(
    treasurers_key, chain, customer, scan_pass, client, tmp_path, foreign_token
):
    from payments.review import Decision, payment_review_decide

    reviewer, treasurer = staff("reviewer", "rita"), staff("treasurer", "tom")
    # Given a paid order whose address also received 7 units of an 18-decimal token the shop does not sell
    placed = customer.order()
    chain.wallet.pay_token(chain.usdc, placed["payment"]["address"], units(placed))
    chain.wallet.pay_token(foreign_token, placed["payment"]["address"], 7 * 10**18)
    chain.mine(2)
    scan_pass()
    # And a reviewer marks it for refund (a stranger's token never opens one by itself), the customer gives an
    # address, the reviewer approves it
    payment_review_decide(payment_id=payment_of(placed).pk, decision=Decision.REFUND, reason="theirs", reviewer="rita")
    refund = Refund.objects.get(payment=payment_of(placed))
    assert (refund.symbol, refund.decimals, int(refund.amount_base_units)) == ("", None, 7 * 10**18)
    refund_approved(client, placed, refund, reviewer)
    chain.wallet.pay_native(gas_account_address(), 10**18)

    # When the treasurer runs the signer with the network's plan
    plan = client.get("/api/v1/treasury/plan/?network=local", headers={"Authorization": f"Token {treasurer}"})
    items = plan.json()["items"]
    (item,) = [item for item in items if (item["contract"] or "").lower() == foreign_token.lower()]
    assert (item["asset"], item["sweep_base_units"]) == ("", 0)  # a payment in review: nothing of it is swept
    (tmp_path / "plan.json").write_text(json.dumps(plan.json()))
    done = run_signer(tmp_path / "plan.json", treasurers_key, chain.node.url, directory=tmp_path, treasury=TREASURY)

    # Then the customer has the 7 tokens back, to the base unit, and the scan confirms the refund
    assert done.returncode == 0, done.stdout + done.stderr
    assert balance(chain.node.url, foreign_token, CUSTOMER_WALLET) == 7 * 10**18
    assert balance(chain.node.url, foreign_token, placed["payment"]["address"]) == 0
    chain.mine(3)
    scan_pass()
    scan_pass()
    assert Refund.objects.get(pk=refund.pk).status == "confirmed"
