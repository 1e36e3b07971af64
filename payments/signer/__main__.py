"""`python -m payments.signer`: the command line (see the package docstring). Exit 0 when every transfer was
mined, 1 otherwise, 2 on a usage error or a plan refused before anything was sent (one that disagrees with the
treasurer's pins, whose refunds exceed a cap, or whose refunds the treasurer did not confirm)."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from payments.signer.chain import Chain
from payments.signer.journal import Journal, RefundRegister, default_register_path
from payments.signer.keys import plan_accounts, read_mnemonic
from payments.signer.pins import check_plan, pins_from
from payments.signer.plan import PlanError, in_sending_order, load_plan
from payments.signer.refunds import check_caps, confirmed, shown_refunds
from payments.signer.transfers import ItemRefused, Signer

USAGE_ERROR, NOT_ALL_MINED = 2, 1


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m payments.signer",
        description="Pay a treasury plan's refunds, then sweep the rest to the treasury.",
    )
    parser.add_argument("--plan", required=True, type=Path, help="the plan JSON (GET /api/v1/treasury/plan/)")
    parser.add_argument("--mnemonic-file", required=True, type=Path, help="the mnemonic, in a file of mode 600")
    parser.add_argument("--rpc-url", required=True, help="a JSON-RPC endpoint of the plan's chain")
    # The pins: the treasurer's, never the plan's (a plan that disagrees is refused); flags override --config.
    parser.add_argument("--config", type=Path, help="a TOML file of the pins below (not writable by group or others)")
    parser.add_argument("--treasury", help="where every sweep goes (required, here or in --config)")
    parser.add_argument("--gas-account", help="the gas account; it must also be the mnemonic's m/44'/60'/0'/1/0")
    parser.add_argument("--chain-id", type=int, help="the chain; the plan's and the RPC's must both be this one")
    parser.add_argument("--max-refunds-usd", help="cap on the run's refunds in USD stablecoins, 1:1 (default 0)")
    parser.add_argument("--max-refunds-native", help="cap on the run's refunds in the chain's coin, whole coins (0)")
    parser.add_argument(
        "--max-refunds-token",
        action="append",
        default=[],
        metavar="CONTRACT=AMOUNT",
        help="cap on the run's refunds in another token, whole tokens (repeatable; without one: none)",
    )
    parser.add_argument("--yes", action="store_true", help="send the refunds shown without asking")
    parser.add_argument("--dry-run", action="store_true", help="print what would be sent, send nothing")
    parser.add_argument("--json", type=Path, help="write every transaction to this file (and its journal beside)")
    parser.add_argument(
        "--refund-register",
        type=Path,
        help="every refund signed, across plans (default: ~/.local/state/payments-signer/refunds-<gas account>.json)",
    )
    return parser.parse_args(argv)  # a usage error exits with 2 (argparse)


def journal_path(args: argparse.Namespace) -> Path:
    """Next to --json when given, else next to the plan: the same command line finds it again on a rerun."""
    base: Path = args.json if args.json is not None else args.plan
    return base.with_name(base.name + ".journal")


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    try:
        pins = pins_from(args)
        plan = load_plan(args.plan)
        accounts, gas_account = plan_accounts(plan, read_mnemonic(args.mnemonic_file))
        check_plan(plan, pins, gas_account.address)
    except PlanError as error:
        print(f"refused: {error}", file=sys.stderr)
        return USAGE_ERROR
    chain = Chain(args.rpc_url)
    try:
        chain_id = chain.chain_id()
    except Exception as error:  # any failure to reach the RPC is reported the same way
        print(f"cannot reach the RPC: {error}", file=sys.stderr)
        return NOT_ALL_MINED
    if chain_id != plan.chain_id:
        print(
            f"refused: the RPC's chain id is {chain_id}, the plan is for {plan.chain_id}; nothing sent", file=sys.stderr
        )
        return USAGE_ERROR
    try:
        shown = shown_refunds(plan, chain)
    except Exception as error:  # the token reads: a dropped RPC, before anything was sent
        print(f"cannot reach the RPC: {error}", file=sys.stderr)
        return NOT_ALL_MINED
    # Every refund first, the one thing the treasurer must judge (the sweeps go to the pinned treasury).
    for entry in shown:
        print(entry.line(), flush=True)
    try:
        check_caps(shown, pins)
        # A dry run reads it too (what is left to send), and never writes or locks it.
        journal = Journal(journal_path(args), plan.digest, lock=not args.dry_run)
        register = RefundRegister(
            args.refund_register or default_register_path(gas_account.address), lock=not args.dry_run
        )
    except PlanError as error:
        print(f"refused: {error}", file=sys.stderr)
        return USAGE_ERROR
    if shown and not args.yes and not args.dry_run and not confirmed(shown):
        print("refused: the refunds were not confirmed: nothing sent", file=sys.stderr)
        return USAGE_ERROR
    # Each line as soon as its receipt is in: a run cut short still shows what it sent.
    signer = Signer(
        chain, plan, journal, dry_run=args.dry_run, echo=functools.partial(print, flush=True), register=register
    )
    ok = True
    for item in in_sending_order(plan.items):
        try:
            signer.carry_out(item, accounts[item.address], gas_account)
        except ItemRefused as error:
            print(f"skipped: {error}", file=sys.stderr)
            ok = False
        except Exception as error:  # a dropped RPC: stop here, the journal makes a rerun safe
            print(f"stopped: {type(error).__name__}: {error}; rerun the same command to finish", file=sys.stderr)
            ok = False
            break
    if args.dry_run:
        to_send = [sent for sent in signer.sent if sent.status == "would send"]  # not what the journal has mined
        total = sum(sent.gas_limit * sent.max_fee_per_gas for sent in to_send)
        print(f"dry run: {len(to_send)} transactions, at most {total} wei of gas; nothing sent")
    if args.json is not None:
        args.json.write_text(json.dumps([sent.as_json() for sent in signer.sent], indent=1))
    return 0 if ok and signer.all_mined else NOT_ALL_MINED


if __name__ == "__main__":
    sys.exit(main())
