"""What the shop accepts as an email address and when two are the same (core.email_address): ASCII before the
@, IDNA 2008 after it, nothing folded to an ASCII look-alike."""

from __future__ import annotations

import pytest

from core.email_address import EmailAddressInvalid, email_match_key, email_normalize


@pytest.mark.parametrize(
    ("typed", "stored", "key"),
    [
        ("  Ada@Example.ORG ", "Ada@example.org", "ada@example.org"),  # the local part kept as typed
        ("o'brien+{x}@example.org", "o'brien+{x}@example.org", "o'brien+{x}@example.org"),
        ("ada@bücher.de", "ada@xn--bcher-kva.de", "ada@xn--bcher-kva.de"),
        ("ada@XN--BCHER-KVA.de", "ada@xn--bcher-kva.de", "ada@xn--bcher-kva.de"),  # the same domain, as punycode
        ("ada@k\u0131osk.example", "ada@xn--kosk-lza.example", "ada@xn--kosk-lza.example"),  # not kiosk.example
    ],
)
def test_an_accepted_address_is_stored_normalised_and_compared_in_ascii_lower_case(typed, stored, key):
    assert email_normalize(typed) == stored
    assert email_normalize(stored) == stored  # normalising twice changes nothing
    assert email_match_key(typed) == key


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("kr\u0131s@example.org", "ASCII"),  # dotless ı
        ("kri\u017f@example.org", "ASCII"),  # long ſ
        ("\u212aris@example.org", "ASCII"),  # Kelvin sign
        ("\uff41da@example.org", "ASCII"),  # fullwidth a
        ("ada@kio\u017fk.example", "domain"),
        ("ada@\u212aiosk.example", "domain"),
        ("ada@K\u0130OSK.example", "domain"),  # capital dotted I: Unicode lower case would give i + a dot
        ("ada@B\u00dcCHER.de", "domain"),  # a capital non-ASCII letter is not folded either
        ("ada@example\u3002org", "domain"),  # an ideographic full stop is not a dot
        ("ada@[127.0.0.1]", "domain"),
        ("ada@example.org\r\nBcc: eve@example.net", "valid"),
        ("ada@localhost.", "valid"),
        ("no-at-sign", "valid"),
        ("a" * 227 + "@" + "".join(chr(0x4E00 + 97 * n) for n in range(18)) + ".example", "long"),  # 254 typed
    ],
)
def test_an_address_with_a_look_alike_or_invalid_part_is_refused_with_a_reason(typed, says):
    with pytest.raises(EmailAddressInvalid) as refused:
        email_normalize(typed)

    assert says in refused.value.message
