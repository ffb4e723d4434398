from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError

from console.audit.api.serializers import AuditEventSerializer
from console.audit.filters import FILTER_FIELDS, FilterError, filter_events
from console.audit.models import AuditEvent
from console.core.roles import OPERATOR


@extend_schema_view(
    list=extend_schema(parameters=[OpenApiParameter(name, str) for name in FILTER_FIELDS])
)
class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """Who changed what, when, from where: operators and admins read it, viewers do not
    (DESIGN.md 8)."""

    serializer_class = AuditEventSerializer
    read_role = OPERATOR

    def get_queryset(self) -> QuerySet[AuditEvent]:
        try:
            return filter_events(self.request.query_params)
        except FilterError as exc:
            raise ValidationError({"filter": [str(exc)]}) from None
