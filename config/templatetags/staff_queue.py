"""`{% staff_queue as queue %}`: the admin start page's queue for the signed-in person (shop/ops_attention.py)."""

from __future__ import annotations

from django import template

from shop.ops_attention import QueueGroup, queue_for

register = template.Library()


@register.simple_tag(takes_context=True)
def staff_queue(context: template.Context) -> list[QueueGroup]:
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return []
    return queue_for(request.user)
