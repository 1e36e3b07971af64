"""What is due back is a typed value (payments/refunds_due.py) whose amount is an integer in base units; the stored
JSON, which the API and the pages read, still writes it as a string."""

from __future__ import annotations

from payments.refunds_due import RefundDue, refunds_due_json, refunds_due_read, refunds_due_text

KEYS = ("network", "chain_id", "asset", "contract", "decimals", "base_units")
STORED = [
    dict(zip(KEYS, ("local", 31337, "USDC", "0x5fbdb", 6, "1500000"), strict=True)),
    dict(zip(KEYS, ("local", 31337, "ETH", None, 18, str(2**200)), strict=True)),
    dict(zip(KEYS, ("base", 8453, None, "0xabc", None, "42"), strict=True)),
]


def test_what_is_stored_reads_back_as_integers_and_is_written_again_unchanged():
    due = refunds_due_read(STORED)
    assert [entry.base_units for entry in due] == [1_500_000, 2**200, 42]
    assert [entry.key for entry in due] == [(31337, "0x5fbdb"), (31337, ""), (8453, "0xabc")]
    assert refunds_due_json(due) == STORED
    assert [list(entry) for entry in refunds_due_json(due)] == [list(entry) for entry in STORED]


def test_the_words_for_staff_name_each_asset_in_its_own_units():
    due = refunds_due_read(STORED)
    assert refunds_due_text(due[::2]) == "1.5 USDC on local, 42 base units of token 0xabc on base"
    assert refunds_due_text([]) == "nothing"
    assert RefundDue.from_json(STORED[2]).decimals is None
