"""`manage.py add_staff USERNAME --role {operator,reviewer} [--password P]`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from core.roles import ROLES, role_group


class Command(BaseCommand):
    help = "Create (or update) a staff user in the operators or payment reviewers group, with only its permissions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=sorted(ROLES), required=True)
        parser.add_argument("--password", help="without it the user cannot log in until a password is set")
        parser.add_argument("--email", default="")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=options["username"])
        user.is_staff = True
        user.is_superuser = False
        if options["email"]:
            user.email = options["email"]
        if options["password"]:
            try:
                validate_password(options["password"], user)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
            user.set_password(options["password"])
        elif created:
            user.set_unusable_password()
        user.save()
        group = role_group(options["role"])
        user.groups.set([group])
        self.stdout.write(f"{'created' if created else 'updated'} {user.username} in {group.name}")
