"""Roles as Django groups: viewer < operator < admin
(docs/architecture.md#security-and-reliability).

viewer reads; operator runs benchmarks, rollouts and rollbacks; admin manages endpoints, keys,
nodes and users. A superuser counts as admin. A view or viewset names the role its unsafe
methods need with `required_role` (default operator); reads need viewer.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
_RANK = {VIEWER: 1, OPERATOR: 2, ADMIN: 3}


def ensure_role_groups() -> None:
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def role_of(user: Any) -> str | None:
    """The highest role the user holds, or None."""
    if user is None or isinstance(user, AnonymousUser) or not user.is_authenticated:
        return None
    if not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached: str | bool | None = getattr(user, "_tiergate_role", False)
    if cached is not False:
        return cached if isinstance(cached, str) else None
    names = set(user.groups.values_list("name", flat=True))
    held = [role for role in ROLES if role in names]
    role = max(held, key=_RANK.__getitem__) if held else None
    user._tiergate_role = role
    return role


def has_role(user: Any, needed: str) -> bool:
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[needed]


def require_role(request: Any, role: str) -> None:
    """For pages: 403 unless the signed-in user has at least `role`."""
    if not has_role(request.user, role):
        raise PermissionDenied(f"This page needs the {role} role.")


class RolePermission(BasePermission):
    """Reads need viewer; writes need the view's `required_role` (operator by default).

    A view may set `read_role` too (e.g. audit events for operators only)."""

    message = "Your role does not allow this action."

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            needed = getattr(view, "read_role", VIEWER)
        else:
            needed = getattr(view, "required_role", OPERATOR)
        return has_role(request.user, needed)
