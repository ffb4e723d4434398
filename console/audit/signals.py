"""Sign-ins are audit events too: who signed in, from where, and failed attempts (the user
name tried, never the password)."""

from __future__ import annotations

from typing import Any

from console.audit.choices import Action
from console.audit.services import record


def login(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    record(action=Action.LOGIN, obj=user, user=user, request=request, message="signed in")


def failed_login(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any) -> None:
    tried = str(credentials.get("username", ""))[:150]
    record(
        action=Action.LOGIN,
        object_type="auth.user",
        object_repr=tried,
        request=request,
        message=f"failed sign-in as {tried!r}",
    )
