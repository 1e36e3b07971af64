"""The API's views of one order addressed by its reference and opened with its token (the X-Order-Token header):
the lookup and the refusal written once."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter

from core.api_errors import ApiView
from orders.models import Order
from orders.orders import order_for_token

TOKEN_HEADER = OpenApiParameter("X-Order-Token", str, OpenApiParameter.HEADER, required=True)


# A view of the order its path names, for whoever holds the order's token. (A comment, not a docstring: the
# schema would show it as the description of every operation.)
class TokenOrderApi(ApiView):
    def token_order(self, reference: str) -> Order:
        """The order, or a 404 when there is none or the token is wrong or missing: the two look the same, and
        core.ratelimit counts the 404 as a guessed token. Called first in the handler (not in `initial`), so that
        a method the view lacks is still a 405 and nothing is read before it."""
        order = order_for_token(reference=reference, token=self.request.headers.get("X-Order-Token"))
        if order is None:
            raise Http404
        return order
