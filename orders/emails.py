"""Customer emails, rendered in the order's language from templates/emails/<name>/{subject,body}.txt + body.html."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.utils import translation


def send_templated_email(*, name: str, to: str, language: str, context: dict[str, Any]) -> None:
    with translation.override(language):
        subject = " ".join(render_to_string(f"emails/{name}/subject.txt", context).split())
        text = render_to_string(f"emails/{name}/body.txt", context)
        html = render_to_string(f"emails/{name}/body.html", context)
    message = EmailMultiAlternatives(subject=subject, body=text, from_email=settings.DEFAULT_FROM_EMAIL, to=[to])
    message.attach_alternative(html, "text/html")
    message.send()
