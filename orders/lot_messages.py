"""What a customer is told when the lots they ask for are not there: shared by the form checks and the order
writers (which check again under the node locks)."""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import ngettext


def only_available_message(available: int) -> str:
    if available == 0:
        return _("Sold out: no lot is available right now.")
    return ngettext(
        "Only %(count)s lot is available right now.", "Only %(count)s lots are available right now.", available
    ) % {"count": available}


def over_cap_message(cap: int) -> str:
    return ngettext(
        "One order can hold at most %(count)s lot until it is paid.",
        "One order can hold at most %(count)s lots until it is paid.",
        cap,
    ) % {"count": cap}
