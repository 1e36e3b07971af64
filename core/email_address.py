"""What the shop accepts as an email address, and when two addresses are the same: one definition for orders,
"Find my order", its rate limit, erasure and the admin's search.

- The local part (before the last @) must be plain ASCII and valid for Django's EmailValidator; it is kept as
  typed, because that is where the mail is delivered. Non-ASCII local parts (SMTPUTF8) are refused.
- The domain is IDNA 2008 (the `idna` package, without UTS-46 mapping), stored in its ASCII form: lower case,
  internationalised labels as punycode (`bücher.de` -> `xn--bcher-kva.de`). Only ASCII letters are lower-cased
  first; a character that a mapping or Unicode case folding would turn into an ASCII look-alike (the Kelvin
  sign, long s, fullwidth letters, a capital non-ASCII letter) is refused, never folded.
- Two addresses are the same when their normalised forms are equal once ASCII letters are lower-cased
  (`email_match_key`). Nothing compares them with the database's case-insensitive operators, which fold
  `ı` to `I` and `ſ` to `S` (PostgreSQL's UPPER).
"""

from __future__ import annotations

import idna
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils.translation import gettext_lazy as _

MAX_LENGTH = 254  # the column's size (RFC 5321's path limit, less the angle brackets)
DOMAIN_INVALID = _(
    "The part after the @ is not a valid domain name. Write it as your email provider does; "
    "internationalised domain names are accepted in lower case."
)


class EmailAddressInvalid(ValueError):
    """The text is not an address the shop accepts; `message` says why, for the email field."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def ascii_lower(text: str) -> str:
    """Lower case for A-Z only."""
    # Only A-Z: str.lower() would also turn the Kelvin sign into "k" and "İ" into "i̇".
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def email_normalize(raw: str) -> str:
    """The address to store and deliver to: stripped, local part as typed, domain as lower-case ASCII."""
    text = raw.strip()
    local, at, domain = text.rpartition("@")
    if not at or not local or not domain:
        raise EmailAddressInvalid(str(_("Enter a valid email address.")))
    if not local.isascii():  # control characters are validate_email's to refuse
        raise EmailAddressInvalid(
            str(_("Only plain ASCII letters, digits and punctuation are accepted before the @ of an email address."))
        )
    try:
        ascii_domain = idna.encode(ascii_lower(domain), uts46=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        raise EmailAddressInvalid(str(DOMAIN_INVALID)) from None
    if ascii_domain.count(".") != domain.count("."):  # the codec also splits on look-alike dots (。．｡)
        raise EmailAddressInvalid(str(DOMAIN_INVALID))
    address = f"{local}@{ascii_lower(ascii_domain)}"
    try:
        validate_email(address)
    except ValidationError:
        raise EmailAddressInvalid(str(_("Enter a valid email address."))) from None
    if len(address) > MAX_LENGTH:
        raise EmailAddressInvalid(str(_("This email address is too long.")))
    return address


def email_match_key(raw: str) -> str:
    """What "the same address" means: the normalised address with its ASCII letters in lower case."""
    return ascii_lower(email_normalize(raw))


def email_match_key_or_blank(raw: str) -> str:
    """The match key of a stored address, or "" for one the shop would refuse today (an order from before these
    rules): "" never equals the key of an address typed in a form, so such an order is never found by one."""
    try:
        return email_match_key(raw)
    except EmailAddressInvalid:
        return ""
