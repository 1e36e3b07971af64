"""How the model size is read: suffixes, exponents, separators and the unit of a plain number."""

from __future__ import annotations

import pytest

from shop.advisor import AdvisorInputError, check_limit, parse_parameter_count


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [
        ("7B", "1", 7_000_000_000),
        ("7b", "T", 7_000_000_000),  # a suffix wins over the unit
        ("350M", "B", 350_000_000),
        ("1.5T", "1", 1_500_000_000_000),
        ("70e9", "B", 70_000_000_000),  # an exponent says the count by itself
        ("7", "B", 7_000_000_000),
        ("0.5", "B", 500_000_000),
        ("1,5", "B", 1_500_000_000),  # a decimal comma
        ("7,000,000,000", "B", 7_000_000_000),  # thousands separators; too big to be billions: a count
        ("7 000 000 000", "1", 7_000_000_000),
        ("7.000.000.000", "1", 7_000_000_000),  # dots grouping thousands (Spanish)
        ("7.5B", "1", 7_500_000_000),
        ("125000000", "1", 125_000_000),
        (7_000_000_000, "1", 7_000_000_000),  # a JSON number
    ],
)
def test_sizes_are_read_as_customers_write_them(text, unit, expected):
    assert parse_parameter_count(text, unit) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Enter the model size"),
        ("seven", "Enter a number of parameters"),
        ("-7B", "Enter a number of parameters"),
        ("0", "must be positive"),
        ("10T", "below 10 trillion"),
        ("1e16", "below 10 trillion"),
        ("1e999999999", "below 10 trillion"),
    ],
)
def test_bad_sizes_are_refused_with_a_message(text, message):
    with pytest.raises(AdvisorInputError) as error:
        parse_parameter_count(text, "B")

    assert error.value.field == "parameters"
    assert message in error.value.message


def test_the_sequence_length_must_be_between_1_and_1_000_000():
    assert check_limit("sequence_length", 1_000_000) == 1_000_000
    with pytest.raises(AdvisorInputError) as error:
        check_limit("sequence_length", 1_000_001)
    assert error.value.message == "The sequence length must be between 1 and 1,000,000 tokens."
