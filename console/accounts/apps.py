from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "console.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        # Registers the OpenAPI description of the token scheme with drf-spectacular.
        from console.accounts import auth  # noqa: F401
