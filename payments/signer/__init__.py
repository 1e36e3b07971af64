"""The signer: pays a treasury plan's refunds and sweeps the rest to the treasury, on the treasurer's machine.

`python -m payments.signer --plan PLAN.json --mnemonic-file FILE --rpc-url URL [--dry-run] [--json OUT]`

The shop derives deposit addresses watch-only from an xpub and never holds a key; this program holds the mnemonic
for one run and imports no Django and nothing of the shop that does (an import-linter contract keeps it so).

What it refuses, before sending anything (exit 2): a mnemonic file that is not a regular file or that group or
others may read or write; a malformed plan; an item whose address does not derive from the mnemonic at its path;
a `gas_account` that is not the mnemonic's `m/44'/60'/0'/1/0`; an RPC whose chain id is not the plan's. An item
whose refunds and sweep exceed what the address holds now is skipped (exit 1 at the end). Destinations come from
the plan only: its refunds' `to_address`es, its `treasury`, and gas top-ups to its own deposit addresses.

The idempotent rerun rule (`journal.py`): every transfer of a plan has a fixed name (its item's address and
`refund:<id>`, `sweep` or `gas`). Before a transfer is broadcast, its signed bytes, nonce and hash are written
to a journal next to `--json` (or next to the plan) and flushed to disk. A rerun never signs a transfer that
the journal names: it waits for the journaled transaction if the chain has it, broadcasts the same bytes again
if the chain does not (the same nonce, so at most one of the two copies can ever be mined), and reports a
failure if the nonce was taken by another transaction. Without a journal (lost), the balance check stops a
second payment: a refund or sweep that was mined left the address holding less than the plan's sum.
"""
