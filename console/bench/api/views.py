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

from console.bench import repeats, services, sides
from console.bench.api.serializers import (
    BenchmarkRunSerializer,
    ComparisonSerializer,
    RepeatPairResultSerializer,
    RepeatPairSerializer,
    RepeatSerializer,
    RequestSampleSerializer,
    RunSeriesSerializer,
)
from console.bench.choices import Preset, RunStatus
from console.bench.models import BenchmarkRun, RequestSample, RunSeries
from console.bench.sweeps.choices import Objective
from console.core.ids import parse_id
from console.core.roles import OPERATOR

_FILTERS = [
    OpenApiParameter("status", str, enum=RunStatus.values, description="Only runs in this state."),
    OpenApiParameter("endpoint", int, description="Only runs against this endpoint id."),
    OpenApiParameter("preset", str, enum=Preset.values, description="Only runs of this preset."),
]
_COMPARE = [
    OpenApiParameter(
        "a", str, required=True, description="Side A (before): a run id, or s<id> for a series."
    ),
    OpenApiParameter(
        "b", str, required=True, description="Side B (after): a run id, or s<id> for a series."
    ),
    OpenApiParameter(
        "objective",
        str,
        enum=Objective.values,
        description="What the decision judges by (default: lowest online TTFT P99).",
    ),
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
        """The decision (B against A, from the objective and guardrails, overall and per
        tier), per-tier deltas with verdicts whose intervals include run-to-run noise when a
        side is a series; the config diff, run conditions, validity and warnings."""
        params = request.query_params
        try:
            found = sides.resolve_all({name: params.get(name, "") for name in ("a", "b")})
        except sides.SideError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        objective = params.get("objective")
        if objective and objective not in Objective.values:
            raise ValidationError({"objective": [f"must be one of {', '.join(Objective.values)}"]})
        data = sides.compare_sides(found["a"], found["b"], objective=objective)
        return Response(ComparisonSerializer(data).data)

    @extend_schema(request=RepeatSerializer, responses={202: RunSeriesSerializer})
    @action(detail=True, methods=["post"])
    def repeat(self, request: Request, pk: str | None = None) -> Response:
        """Queue N more runs like this one (a series), one after another on its target."""
        run = self.get_object()
        body = RepeatSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        series = repeats.create_series(run, body.validated_data["repeats"], request.user, request)
        data = RunSeriesSerializer(series, context={"request": request}).data
        return Response(data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=RepeatPairSerializer, responses={202: RepeatPairResultSerializer})
    @action(detail=False, methods=["post"], url_path="repeat-pair")
    def repeat_pair(self, request: Request) -> Response:
        """Queue N runs like `a` and N like `b`, interleaved A B A B; compare the two series."""
        body = RepeatPairSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        try:
            series_a, series_b = repeats.create_pair(
                v["a"], v["b"], v["repeats"], request.user, request
            )
        except services.RunError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        context = {"request": request}
        data = {
            "a": RunSeriesSerializer(series_a, context=context).data,
            "b": RunSeriesSerializer(series_b, context=context).data,
            "compare": f"/api/v1/benchmarks/compare/?a={series_a.ref}&b={series_b.ref}",
        }
        return Response(data, status=status.HTTP_202_ACCEPTED)


class RunSeriesViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Series of repeated runs: their runs and states; cancel (operator) stops the rest."""

    serializer_class = RunSeriesSerializer
    required_role = OPERATOR
    queryset = RunSeries.objects.order_by("-created_at", "-id")

    @extend_schema(request=None, responses={202: RunSeriesSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        series = repeats.request_cancel_series(self.get_object(), request.user, request)
        data = self.get_serializer(series).data
        return Response(data, status=status.HTTP_202_ACCEPTED)
