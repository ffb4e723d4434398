from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from console.bench import results, services
from console.bench.api.serializers import (
    BenchmarkRunSerializer,
    ComparisonSerializer,
    RequestSampleSerializer,
)
from console.bench.choices import Preset, RunStatus
from console.bench.models import BenchmarkRun, RequestSample
from console.core.ids import parse_id
from console.core.roles import OPERATOR

_FILTERS = [
    OpenApiParameter("status", str, enum=RunStatus.values, description="Only runs in this state."),
    OpenApiParameter("endpoint", int, description="Only runs against this endpoint id."),
    OpenApiParameter("preset", str, enum=Preset.values, description="Only runs of this preset."),
]
_COMPARE = [
    OpenApiParameter("a", int, required=True, description="Run A (before)."),
    OpenApiParameter("b", int, required=True, description="Run B (after)."),
]


class SamplePagination(PageNumberPagination):
    page_size = 500
    page_size_query_param = "page_size"
    max_page_size = 5000


@extend_schema_view(list=extend_schema(parameters=_FILTERS))
class BenchmarkRunViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Benchmark runs: create (operator) queues a Celery task; read progress and summaries."""

    serializer_class = BenchmarkRunSerializer
    required_role = OPERATOR

    def get_queryset(self) -> QuerySet[Any]:
        qs = BenchmarkRun.objects.select_related("endpoint", "created_by").order_by(
            "-created_at", "-id"
        )
        params = self.request.query_params
        if params.get("status"):
            if params["status"] not in RunStatus.values:
                raise ValidationError({"status": [f"must be one of {', '.join(RunStatus.values)}"]})
            qs = qs.filter(status=params["status"])
        if params.get("endpoint"):
            qs = qs.filter(endpoint_id=parse_id(params["endpoint"], "endpoint"))
        if params.get("preset"):
            if params["preset"] not in Preset.values:
                raise ValidationError({"preset": [f"must be one of {', '.join(Preset.values)}"]})
            qs = qs.filter(preset=params["preset"])
        return qs

    @extend_schema(request=None, responses=BenchmarkRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a pending or running run; a finished one is returned unchanged (409)."""
        run = self.get_object()
        if not run.is_active:
            return Response(self.get_serializer(run).data, status=status.HTTP_409_CONFLICT)
        run = services.request_cancel(run, request.user, request)
        return Response(self.get_serializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=RequestSampleSerializer(many=True))
    @action(
        detail=True,
        methods=["get"],
        pagination_class=SamplePagination,
        serializer_class=RequestSampleSerializer,
    )
    def samples(self, request: Request, pk: str | None = None) -> Response:
        """Per-request samples, in index order, paginated (page_size up to 5000)."""
        run = self.get_object()
        qs = RequestSample.objects.filter(run=run).order_by("index")
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(RequestSampleSerializer(page, many=True).data)

    @extend_schema(parameters=_COMPARE, responses=ComparisonSerializer)
    @action(detail=False, methods=["get"])
    def compare(self, request: Request) -> Response:
        """Per-tier deltas (B minus A) with bootstrap verdicts, and the config diff."""
        ids = {}
        for name in ("a", "b"):
            raw = request.query_params.get(name, "")
            if not raw:
                raise ValidationError({name: ["required: the id of a run"]})
            ids[name] = parse_id(raw, name)
        runs = {
            r.pk: r
            for r in BenchmarkRun.objects.select_related("endpoint").filter(pk__in=ids.values())
        }
        for name, pk in ids.items():
            if pk not in runs:
                raise ValidationError({name: [f"no run with id {pk}"]})
        data = results.compare_runs(runs[ids["a"]], runs[ids["b"]])
        return Response(ComparisonSerializer(data).data)
