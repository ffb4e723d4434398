"""`manage.py create_api_token USER NAME`: a token for automation, printed once (stdout only)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.accounts.services import TokenError, create_token


class Command(BaseCommand):
    help = "Create a named API token for USER and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("name", help="what the token is for, e.g. ci-nightly")

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        try:
            user = user_model.objects.get(username=options["username"])
        except user_model.DoesNotExist:
            raise CommandError(f"username: no user {options['username']!r}") from None
        try:
            _token, plaintext = create_token(user, options["name"])
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(plaintext)
