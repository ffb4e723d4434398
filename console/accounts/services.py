"""Token workflows, called by the page, the API and the management command alike.

create_token(user, name, by=None, request=None) -> (ApiToken, plaintext)   # shown once
revoke_token(token, by, request=None)                                     # owner or admin
user_for_token(plaintext) -> (user, ApiToken) | None                      # the hot path
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from console.accounts.models import LAST_USED_RESOLUTION, TOKEN_PREFIX, ApiToken
from console.audit.choices import Action
from console.audit.services import record
from console.core.roles import ADMIN, has_role
from console.fleet.crypto import sha256_hex

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class TokenError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise TokenError(
            "name",
            "1-100 characters: letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


def create_token(
    user: Any, name: Any, *, by: Any = None, request: Any = None
) -> tuple[ApiToken, str]:
    name = check_name(name)
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user, name=name, sha256=sha256_hex(plaintext), prefix=plaintext[:8]
            )
            record(
                action=Action.CREATE,
                obj=token,
                after={"name": name, "user": user.get_username(), "prefix": token.prefix},
                user=by or user,
                request=request,
            )
    except IntegrityError:
        raise TokenError("name", f"you already have an active token named {name!r}") from None
    return token, plaintext


def can_revoke(token: ApiToken, by: Any) -> bool:
    return token.user_id == getattr(by, "pk", None) or has_role(by, ADMIN)


def revoke_token(token: ApiToken, by: Any, request: Any = None) -> ApiToken:
    if not can_revoke(token, by):
        raise PermissionError("only the token's owner or an admin can revoke it")
    with transaction.atomic():
        locked = ApiToken.objects.select_for_update().get(pk=token.pk)
        if locked.revoked_at is not None:
            return locked
        locked.revoked_at = timezone.now()
        locked.revoked_by = by
        locked.save(update_fields=["revoked_at", "revoked_by"])
        record(
            action=Action.DELETE,
            message="revoked",
            obj=locked,
            before={"active": True},
            after={"active": False, "user": locked.user.get_username()},
            user=by,
            request=request,
        )
    return locked


def user_for_token(plaintext: str) -> tuple[Any, ApiToken] | None:
    if not plaintext.startswith(TOKEN_PREFIX):
        return None
    token = (
        ApiToken.objects.active()
        .select_related("user")
        .filter(sha256=sha256_hex(plaintext))
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        # A conditional UPDATE: concurrent requests write it at most once per resolution.
        ApiToken.objects.filter(pk=token.pk, last_used_at=token.last_used_at).update(
            last_used_at=now
        )
        token.last_used_at = now
    return token.user, token
