"""DRF authentication with API tokens: `Authorization: Bearer tgt_...` (the keyword `Token`, as
DRF's own scheme spells it, is accepted too)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from console.accounts.models import TOKEN_PREFIX, ApiToken
from console.accounts.services import user_for_token

KEYWORDS = (b"bearer", b"token")


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Bearer <API token> expected.")
        try:
            plaintext = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid API token.") from None
        if not plaintext.startswith(TOKEN_PREFIX):
            # Another scheme's credential (a node token on the heartbeat, say): not ours.
            return None
        found = user_for_token(plaintext)
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        return found

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "console.accounts.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "API token (tgt_...). Create one on the console's API tokens page "
                "(/accounts/tokens/) or with `manage.py create_api_token USER NAME`; send it as "
                "`Authorization: Bearer <token>`. It acts with its owner's role."
            ),
        }
