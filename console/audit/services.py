"""Record audit events. Every app calls `record` inside the same transaction as the change,
so a change and its audit row land together or not at all."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.http import HttpRequest

from console.audit.models import AuditEvent


def client_ip(request: HttpRequest | None) -> str | None:
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def record(
    *,
    action: str,
    obj: models.Model | None = None,
    object_type: str = "",
    object_id: str = "",
    object_repr: str = "",
    before: Any = None,
    after: Any = None,
    user: Any = None,
    request: HttpRequest | None = None,
    message: str = "",
) -> AuditEvent:
    if request is not None and user is None:
        user = getattr(request, "user", None)
    if user is not None and not getattr(user, "is_authenticated", False):
        user = None
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = object_id or str(obj.pk)
        object_repr = object_repr or str(obj)[:200]
    return AuditEvent.objects.create(
        actor=user,
        actor_name=user.get_username() if user is not None else "system",
        action=action,
        object_type=object_type,
        object_id=object_id,
        object_repr=object_repr[:200],
        before=before,
        after=after,
        source_ip=client_ip(request),
        message=message[:500],
    )
