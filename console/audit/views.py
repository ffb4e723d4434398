from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.audit.choices import Action
from console.audit.filters import FILTER_FIELDS, FilterError, filter_events
from console.audit.models import AuditEvent
from console.core.roles import OPERATOR, require_role


@login_required
def event_list(request: HttpRequest) -> HttpResponse:
    # docs/architecture.md#security-and-reliability: actors and source addresses are for operators
    # and admins, as in the API.
    require_role(request, OPERATOR)
    error = ""
    try:
        events = filter_events(request.GET)
    except FilterError as exc:
        error, events = str(exc), AuditEvent.objects.none()
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "audit/event_list.html",
        {
            "page": page,
            "error": error,
            "actions": Action.choices,
            "filters": {name: request.GET.get(name, "") for name in FILTER_FIELDS},
            "query": query.urlencode(),
            "object_types": AuditEvent.objects.values_list("object_type", flat=True)
            .distinct()
            .order_by("object_type"),
        },
    )
