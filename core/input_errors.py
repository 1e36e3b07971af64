"""The error every writer of the order raises for bad input: which field, and what to tell the customer."""

from __future__ import annotations


class OrderInputError(Exception):
    """A problem with one field of the order, with a message for the customer."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
