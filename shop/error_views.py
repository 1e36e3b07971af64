"""What a request that cannot be read gets back: a status and a sentence, as JSON under /api/, a page elsewhere.

Django answers a body over DATA_UPLOAD_MAX_MEMORY_SIZE, or a form with too many fields, with a bare
"Bad Request (400)" page that says nothing, even to an API client that sent JSON.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

REQUEST_ENTITY_TOO_LARGE = 413


def _megabytes(size: int) -> str:
    return f"{size / 2**20:g}"  # Django's default, 2621440 bytes, reads "2.5"


def bad_request_message(exception: Exception | None) -> tuple[int, str]:
    if isinstance(exception, RequestDataTooBig):
        return REQUEST_ENTITY_TOO_LARGE, _("The request is too large: send at most %(size)s MB.") % {
            "size": _megabytes(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        }
    if isinstance(exception, TooManyFieldsSent | TooManyFilesSent):
        return REQUEST_ENTITY_TOO_LARGE, _("The request has too many fields.")
    return 400, _("The request could not be read; check what was sent.")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400: Django calls it for SuspiciousOperation, a body too large included."""
    status, message = bad_request_message(exception)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return render(request, "400.html", {"message": message}, status=status)
