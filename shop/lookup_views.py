"""Find my order: the page (/order/find/) and the API (POST /api/v1/orders/lookup/).

Both answer the same way for any well-formed email, with or without orders; only a malformed email is refused
(on the field), and past a limit per client or per email address both answer 429 with the same words.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import LIMITED_BODY_READ, documented
from core.api_fields import EmailTextField
from core.ratelimit import count, email_key, exceeded, too_many
from shop.forms import OrderFindForm
from shop.order_lookup import order_lookup_request


def lookup_sent_message() -> str:
    return _(
        "If orders were placed with this email address, an email listing them with their private links is on "
        "its way. It can take a few minutes; check your spam folder too."
    )


def _limited_for_email(request: HttpRequest, email: str) -> HttpResponse | None:
    """429 once an address was asked about too often, whoever asks: it caps the emails one address receives."""
    if not settings.RATELIMIT_ENABLE:
        return None
    key = email_key(email)
    retry_after = exceeded("lookups_per_email", key)
    if retry_after:
        return too_many(request, retry_after)
    count("lookups_per_email", key)
    return None


@require_http_methods(["GET", "POST"])
def order_find(request: HttpRequest) -> HttpResponse:
    form = OrderFindForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        limited = _limited_for_email(request, email)
        if limited:
            return limited
        order_lookup_request(email=email)
        return redirect("shop:order_find_sent")
    return render(request, "shop/order_find.html", {"form": form}, status=400 if form.errors else 200)


def order_find_sent(request: HttpRequest) -> HttpResponse:
    # Its own address (after a redirect): a reload sends nothing again, and the page never echoes the email.
    return render(request, "shop/order_find.html", {"sent_message": lookup_sent_message()})


class LookupInput(serializers.Serializer[Mapping[str, object]]):
    email = EmailTextField(max_length=254)


class LookupOutput(serializers.Serializer[Mapping[str, object]]):
    detail = serializers.CharField()


class OrderLookupApi(APIView):
    @extend_schema(
        request=LookupInput,
        responses=documented({202: LookupOutput}, LIMITED_BODY_READ),
        summary='"Find my order": email the links of the orders an address placed',
        description="Always 202 with the same body for a well-formed email, whether or not it placed orders.",
    )
    def post(self, request: Request) -> HttpResponse:  # a Response, or the rate limit's 429 (JSON under /api/)
        data = LookupInput(data=request.data)
        data.is_valid(raise_exception=True)
        email = data.validated_data["email"]
        limited = _limited_for_email(request, email)
        if limited:
            return limited
        order_lookup_request(email=email)
        return Response({"detail": lookup_sent_message()}, status=status.HTTP_202_ACCEPTED)
