"""Content-Security-Policy on every response: scripts and styles only from the shop's own files.

No page has an inline `<script>`, a `style=` attribute or an event-handler attribute, so the policy needs
no `unsafe-inline`; the QR code is inline SVG markup (not an image URL) and the admin ships no inline
script either. `tests/deploy/test_security_headers.py` renders the pages to keep it that way.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"
TECHNICAL_PAGE_MARKER = b'<meta name="robots" content="NONE,NOARCHIVE">'


def policy_header(policy: dict[str, list[str]]) -> str:
    return "; ".join(" ".join([directive, *sources]) for directive, sources in policy.items())


class ContentSecurityPolicyMiddleware:
    """Sets `settings.CONTENT_SECURITY_POLICY` unless a view set its own header."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.header = policy_header(settings.CONTENT_SECURITY_POLICY)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not (settings.DEBUG and _is_technical_page(response)):
            response.headers.setdefault(HEADER, self.header)
        return response


def _is_technical_page(response: HttpResponse) -> bool:
    """Django's debug pages (DEBUG only) are styled and scripted inline: they stay readable in development."""
    return response.status_code >= 400 and not response.streaming and TECHNICAL_PAGE_MARKER in response.content[:2000]
