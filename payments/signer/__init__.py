"""The signer: pays a treasury plan's refunds and sweeps the rest to the treasury, on the treasurer's machine.

`python -m payments.signer --plan PLAN.json --mnemonic-file FILE --rpc-url URL --treasury ADDRESS
[--gas-account ADDRESS] [--chain-id N] [--max-refunds-usd X] [--max-refunds-native X]
[--max-refunds-token CONTRACT=X ...] [--config FILE] [--yes] [--dry-run] [--json OUT]`

The plan comes from a server that may have been taken over, so what decides where money goes is pinned on the
treasurer's side (`pins.py`: flags, or a TOML `--config` file that group and others may not write): the treasury,
the gas account, the chain. Every refund is listed before anything is sent (`refunds.py`: destination, amount in
the token's own symbol and decimals as its contract answers them, order reference) and needs the treasurer's `y`
on stdin unless `--yes`; the run's refunds must stay under caps set on the treasurer's side (0 by default).

The shop derives deposit addresses watch-only from an xpub and never holds a key; this program holds the mnemonic
for one run and imports no Django and nothing of the shop that does (an import-linter contract keeps it so).

What it refuses, before sending anything (exit 2): a plan whose treasury, gas account or chain is not the pinned
one; refunds above a cap; refunds the treasurer did not confirm (an answer other than y, or none); a mnemonic file
that is not a regular file or that group or others may read or write; a malformed plan; an item whose address does
not derive from the mnemonic at its path; a `gas_account` that is not the mnemonic's `m/44'/60'/0'/1/0`; an RPC
whose chain id is not the plan's. An item whose refunds and sweep exceed what the address holds now is skipped (exit
1 at the end). Destinations: the refunds' `to_address`es the treasurer confirmed, the pinned treasury, and gas
top-ups to the plan's own deposit addresses (which derive from the mnemonic).

The idempotent rerun rule (`journal.py`, `transfers.py`): every transfer of a plan has a fixed name (its item's
address and asset, then `refund:<id>`, `sweep` or `gas:<n>`). Before a transfer is broadcast, its signed bytes,
nonce and hash are written to a journal next to `--json` (or next to the plan) and flushed to disk. A rerun never
signs a transfer that the journal names: it takes the receipt if the transaction was mined, waits for it if the
node has it pending, broadcasts the same bytes again if the chain never got them (the same nonce, so at most one
of the two copies can ever be mined), and reports a failure if the nonce was taken by another transaction. A
journal belongs to one plan (the plan's digest is in it) and one run at a time (a lock beside it). Without the
journal (lost), the balance check stops a second payment where the plan moves the whole balance: a refund or
sweep that was mined left the address holding less than the plan's sum.

A refund is paid once across plans (`journal.RefundRegister`): every refund signed is also written, before its
broadcast, to a register keyed `refund:<chain id>:<refund id>` that outlives the plan (`--refund-register`, by
default `payments-signer/refunds-<gas account>.json` in the treasurer's state directory, `$XDG_STATE_HOME` or
`~/.local/state`). A later plan that names the refund again (the shop's scan has not recorded the transfer yet)
resumes that transaction as a journal entry is resumed, reported "sent by an earlier plan: not sent again"; it
never signs a second one.
"""
