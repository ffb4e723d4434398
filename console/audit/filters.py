"""Filtering of audit events shared by the page and the API."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from console.audit.choices import Action
from console.audit.models import AuditEvent

FILTER_FIELDS = ("actor", "action", "object_type", "object_id", "since", "until")


class FilterError(ValueError):
    """`field` names the parameter; str() is "field: message" for pages."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _when(name: str, value: str) -> datetime:
    try:
        parsed = parse_datetime(value)
    except ValueError:  # well-formed but impossible, e.g. month 13
        parsed = None
    if parsed is None:
        raise FilterError(name, f"not an ISO 8601 date-time: {value!r}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)  # stored and compared in UTC
    try:
        # In UTC before it reaches the database: PostgreSQL refuses offsets past +-15:59.
        return parsed.astimezone(UTC)
    except OverflowError:
        raise FilterError(name, f"out of range: {value!r}") from None


def filter_events(params: Mapping[str, str]) -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.all()
    if params.get("actor"):
        qs = qs.filter(actor_name=params["actor"])
    if params.get("action"):
        if params["action"] not in Action.values:
            raise FilterError("action", f"must be one of {', '.join(Action.values)}")
        qs = qs.filter(action=params["action"])
    if params.get("object_type"):
        qs = qs.filter(object_type=params["object_type"])
    if params.get("object_id"):
        qs = qs.filter(object_id=params["object_id"])
    if params.get("since"):
        qs = qs.filter(created_at__gte=_when("since", params["since"]))
    if params.get("until"):
        qs = qs.filter(created_at__lt=_when("until", params["until"]))
    return qs
