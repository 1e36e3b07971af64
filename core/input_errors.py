"""The error every writer of the order raises for bad input: which field, and what to tell the customer."""

from __future__ import annotations


class OrderInputError(Exception):
    """A problem with one field of the order, with a message for the customer."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class CodedRefusal(Exception):
    """A refusal a script branches on: answered 409 with its stable `code`, its words as the `detail`, and the facts
    it names (strings: the current price, say) beside them (core/api_errors.py)."""

    code = "conflict"

    def __init__(self, message: str, **facts: str) -> None:
        super().__init__(message)
        self.facts = facts
