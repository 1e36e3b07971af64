"""Staff accounts for tests, made as an operator makes them (`manage.py add_staff`), one password for all."""

from __future__ import annotations

import io

from django.contrib.auth import get_user_model
from django.core.management import call_command

STAFF_PASSWORD = "a-long-passphrase-for-staff-42"


def add_staff(username: str, role: str):
    call_command("add_staff", username, "--role", role, "--password", STAFF_PASSWORD, stdout=io.StringIO())
    return get_user_model().objects.get(username=username)
