"""manage.py adduser NAME --role viewer|operator|admin [--password-file F | --password P]."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from console.core.roles import ADMIN, ROLES, ensure_role_groups


class Command(BaseCommand):
    help = "Create a user (or update an existing one) with a role: viewer, operator or admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--email", default="")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--password", help="prefer --password-file: argv is visible to ps")
        source.add_argument("--password-file", type=Path)
        parser.add_argument("--update", action="store_true", help="change an existing user")

    def handle(self, *args: Any, **opts: Any) -> None:
        password = opts["password"]
        if opts["password_file"] is not None:
            try:
                password = opts["password_file"].read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise CommandError(f"--password-file: cannot read: {exc.strerror}") from None
        generated = password is None
        if generated:
            password = secrets.token_urlsafe(12)
        try:
            validate_password(password)
        except ValidationError as exc:
            raise CommandError("--password: " + " ".join(exc.messages)) from None

        ensure_role_groups()
        User = get_user_model()
        with transaction.atomic():
            user = User.objects.filter(username=opts["username"]).first()
            if user is not None and not opts["update"]:
                raise CommandError(
                    f"username: {opts['username']!r} exists (use --update to change it)"
                )
            if user is None:
                user = User(username=opts["username"], email=opts["email"])
            user.set_password(password)
            user.is_staff = opts["role"] == ADMIN
            user.is_superuser = False
            user.save()
            user.groups.set([Group.objects.get(name=opts["role"])])
        self.stdout.write(f"user {user.username} has role {opts['role']}")
        if generated:
            self.stdout.write(f"password: {password}")
