"""Template context: the navigation bar and the signed-in user's role."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from console.core.roles import OPERATOR, VIEWER, has_role, role_of

# (label, url name, the role that may open it). An entry shows once its app provides the URL
# name, so each app adds itself to the bar by existing; it shows only to users who may open it.
NAV_ITEMS: list[tuple[str, str, str]] = [
    ("Fleet", "fleet:node-list", VIEWER),
    ("Endpoints", "fleet:endpoint-list", VIEWER),
    ("Tier configs", "tuning:tierconfig-list", VIEWER),
    ("Launch profiles", "tuning:launchprofile-list", VIEWER),
    ("Benchmarks", "bench:run-list", VIEWER),
    ("Sweeps", "bench:sweep-list", VIEWER),
    ("Playground", "playground:index", OPERATOR),
    ("Rollouts", "tuning:rollout-list", VIEWER),
    ("Audit", "audit:event-list", OPERATOR),
]


def _nav(user: Any) -> list[tuple[str, str]]:
    items = []
    for label, name, role in NAV_ITEMS:
        if role != VIEWER and not has_role(user, role):
            continue
        try:
            items.append((label, reverse(name)))
        except NoReverseMatch:
            continue
    return items


def navigation(request: HttpRequest) -> dict[str, Any]:
    items = _nav(getattr(request, "user", None))
    path = getattr(request, "path", "")
    # The active item is the one whose URL is the longest prefix of the current path.
    matches = [url for _label, url in items if path.startswith(url)]
    active = max(matches, key=len) if matches else None
    return {
        "nav_items": [(label, url, url == active) for label, url in items],
        "user_role": role_of(getattr(request, "user", None)),
    }
