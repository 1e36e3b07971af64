"""The derivation index of each deposit address: taken with one conditional UPDATE, each index exactly once,
even by checkouts racing each other before the key's cursor exists, and given back only by a rollback."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from payments.checkout import derivation_index_take
from payments.models import AddressCursor
from tests.payments.test_capacity_race import run_together

race = pytest.mark.django_db(transaction=True, serialized_rollback=True)
KEY = "f" * 64


@pytest.mark.django_db
def test_a_new_key_starts_at_index_zero_and_each_take_moves_its_cursor_on():
    # Given an account key no address was ever derived from
    assert not AddressCursor.objects.filter(key_fingerprint=KEY).exists()

    # When three indexes are taken
    with transaction.atomic():
        taken = [derivation_index_take(fingerprint=KEY) for _ in range(3)]

    # Then they are 0, 1, 2 and the cursor points past them
    assert taken == [0, 1, 2]
    assert AddressCursor.objects.get(key_fingerprint=KEY).next_index == 3


@pytest.mark.django_db
def test_an_index_taken_in_a_transaction_that_rolls_back_is_taken_again():
    with transaction.atomic():
        derivation_index_take(fingerprint=KEY)

    with pytest.raises(IntegrityError), transaction.atomic():
        assert derivation_index_take(fingerprint=KEY) == 1
        raise IntegrityError("the order could not be stored")

    with transaction.atomic():
        assert derivation_index_take(fingerprint=KEY) == 1


@pytest.mark.django_db
def test_indexes_of_two_keys_never_mix():
    other = "e" * 64
    with transaction.atomic():
        assert [derivation_index_take(fingerprint=KEY), derivation_index_take(fingerprint=other)] == [0, 0]
        assert derivation_index_take(fingerprint=KEY) == 1
    assert AddressCursor.objects.get(key_fingerprint=other).next_index == 1


@race
@pytest.mark.parametrize("cursor_exists", [False, True], ids=["first-use-of-the-key", "cursor-exists"])
def test_checkouts_racing_for_indexes_each_get_their_own(cursor_exists):
    # Given eight checkouts at the same instant, each in its own transaction (an extension takes no node lock)
    if cursor_exists:
        AddressCursor.objects.create(key_fingerprint=KEY, next_index=40)
    first = 40 if cursor_exists else 0

    def checkout() -> int:
        with transaction.atomic():
            return derivation_index_take(fingerprint=KEY)

    # When each takes an index
    results = run_together(checkout)

    # Then all succeed with distinct, consecutive indexes, and the cursor points past the last
    assert not [result for result in results if isinstance(result, Exception)], results
    assert Counter(results) == Counter(range(first, first + len(results)))
    assert AddressCursor.objects.get(key_fingerprint=KEY).next_index == first + len(results)
    assert AddressCursor.objects.filter(key_fingerprint=KEY).count() == 1
