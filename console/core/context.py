"""Template context: the navigation bar and the signed-in user's role."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from console.core.roles import role_of

# (label, url name). An entry shows once its app provides the URL name, so each app adds
# itself to the bar by existing.
NAV_ITEMS = [
    ("Fleet", "fleet:node-list"),
    ("Endpoints", "fleet:endpoint-list"),
    ("Tier configs", "tuning:tierconfig-list"),
    ("Launch profiles", "tuning:launchprofile-list"),
    ("Benchmarks", "bench:run-list"),
    ("Rollouts", "tuning:rollout-list"),
    ("Audit", "audit:event-list"),
]


def _nav() -> list[tuple[str, str]]:
    items = []
    for label, name in NAV_ITEMS:
        try:
            items.append((label, reverse(name)))
        except NoReverseMatch:
            continue
    return items


def navigation(request: HttpRequest) -> dict[str, Any]:
    items = _nav()
    path = getattr(request, "path", "")
    # The active item is the one whose URL is the longest prefix of the current path.
    matches = [url for _label, url in items if path.startswith(url)]
    active = max(matches, key=len) if matches else None
    return {
        "nav_items": [(label, url, url == active) for label, url in items],
        "user_role": role_of(getattr(request, "user", None)),
    }
