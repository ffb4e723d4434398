from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError

from console.audit.api.serializers import AuditEventSerializer
from console.audit.choices import Action
from console.audit.filters import FILTER_FIELDS, FilterError, filter_events
from console.audit.models import AuditEvent
from console.core.roles import OPERATOR

_FILTERS = [
    OpenApiParameter("action", str, enum=Action.values),
    *(
        OpenApiParameter(name, OpenApiTypes.DATETIME, description="ISO 8601")
        for name in ("since", "until")
    ),
    *(OpenApiParameter(n, str) for n in FILTER_FIELDS if n not in ("action", "since", "until")),
]


@extend_schema_view(list=extend_schema(parameters=_FILTERS))
class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """Who changed what, when, from where: operators and admins read it, viewers do not
    (docs/architecture.md#security-and-reliability)."""

    serializer_class = AuditEventSerializer
    read_role = OPERATOR

    def get_queryset(self) -> QuerySet[AuditEvent]:
        try:
            return filter_events(self.request.query_params)
        except FilterError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
