"""The 500 handler: a database that is down or restarting is a 503 with Retry-After (try again soon), not a bug.

Nothing here touches the database or renders a template that might (the auth context processor would).
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape
from django.utils.translation import gettext as _
from django.views.defaults import server_error as django_server_error

RETRY_AFTER_SECONDS = 10


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    # Django calls the handler inside its `except` block: the exception is the one being handled.
    if not isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        return django_server_error(request, template_name)
    message = _("The service is briefly unavailable. Please try again in a minute.")
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": message}, status=503)
    else:
        head = '<!doctype html><html><head><meta charset="utf-8"><title>503</title></head>'
        response = HttpResponse(f"{head}<body><h1>{escape(message)}</h1></body></html>", status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
