"""REST API of sweeps: /api/v1/sweeps/ (+ {id}/cancel/, {id}/adopt/) and the trials'
/api/v1/sweep-trials/. Reads need viewer, writes operator; writes go through services.py and
a refusal comes back naming the field (400; 409 when the sweep's state forbids it now)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from console.bench.sweeps import services
from console.bench.sweeps.api.serializers import (
    AdoptResultSerializer,
    AdoptSerializer,
    SweepCreateSerializer,
    SweepDetailSerializer,
    SweepSerializer,
    SweepTrialSerializer,
)
from console.bench.sweeps.choices import SweepStatus
from console.bench.sweeps.models import Sweep, SweepTrial
from console.core.ids import parse_id
from console.core.roles import OPERATOR
from console.tuning.rollouts.api.views import RolloutDetailSerializer
from console.tuning.rollouts.models import Rollout

_FILTERS = [
    OpenApiParameter("status", str, enum=SweepStatus.values, description="Only sweeps in it."),
    OpenApiParameter("node", int, description="Only sweeps of this node id."),
]


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The sweep's state does not allow this now."


def _refuse(exc: services.SweepError) -> None:
    body = {exc.field: [exc.message]}
    if exc.conflict:
        raise Conflict(body) from None
    raise ValidationError(body) from None


@extend_schema_view(list=extend_schema(parameters=_FILTERS))
class SweepViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Tuning sweeps: a node, a base version, values to try, a workload, constraints and an
    objective; each trial an ordinary benchmark series."""

    required_role = OPERATOR

    def get_queryset(self) -> QuerySet[Any]:
        qs = Sweep.objects.select_related(
            "node", "endpoint", "created_by", "base_tier_config", "base_launch_profile"
        ).order_by("-created_at", "-id")
        if self.action != "list":
            qs = qs.prefetch_related("trials__tier_config", "trials__launch_profile")
        params = self.request.query_params
        if params.get("status"):
            if params["status"] not in SweepStatus.values:
                raise ValidationError(
                    {"status": [f"must be one of {', '.join(SweepStatus.values)}"]}
                )
            qs = qs.filter(status=params["status"])
        if params.get("node"):
            qs = qs.filter(node_id=parse_id(params["node"], "node"))
        return qs

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "create":
            return SweepCreateSerializer
        return SweepSerializer if self.action == "list" else SweepDetailSerializer

    def _detail(self, sweep: Sweep) -> dict[str, Any]:
        obj = self.get_queryset().get(pk=sweep.pk)
        return dict(SweepDetailSerializer(obj, context=self.get_serializer_context()).data)

    @extend_schema(request=SweepCreateSerializer, responses={201: SweepDetailSerializer})
    def create(self, request: Request) -> Response:
        """Start a sweep; a worker runs its trials one after another."""
        form = SweepCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            sweep = services.create_sweep(dict(form.validated_data), request.user, request)
        except services.SweepError as exc:
            _refuse(exc)
        return Response(self._detail(sweep), status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: SweepDetailSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Stop the sweep: the node goes back to its base versions; a finished one is 409."""
        try:
            sweep = services.cancel_sweep(self.get_object(), request.user, request)
        except services.SweepError as exc:
            _refuse(exc)
        return Response(self._detail(sweep), status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=AdoptSerializer, responses={201: AdoptResultSerializer})
    @action(detail=True, methods=["post"])
    def adopt(self, request: Request, pk: str | None = None) -> Response:
        """Make the trial a new version under the base's name and roll it out to the node
        with the SLO guard on. The sweep must be finished, the trial succeeded and feasible;
        a trial not decided "better" than the base needs `confirm_undecided: true`."""
        sweep = self.get_object()
        body = AdoptSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trial = SweepTrial.objects.filter(sweep=sweep, index=body.validated_data["trial"]).first()
        if trial is None:
            raise ValidationError(
                {"trial": [f"{sweep} has no trial {body.validated_data['trial']}"]}
            )
        try:
            rollout = services.adopt_trial(
                sweep,
                trial,
                request.user,
                request,
                confirm_undecided=body.validated_data["confirm_undecided"],
            )
        except services.SweepError as exc:
            _refuse(exc)
        context = self.get_serializer_context()
        shown = Rollout.objects.with_progress().prefetch_related("nodes__node", "events__node")
        data = {
            "sweep": self._detail(sweep),
            "rollout": RolloutDetailSerializer(shown.get(pk=rollout.pk), context=context).data,
        }
        return Response(data, status=status.HTTP_201_CREATED)


_TRIAL_FILTERS = [OpenApiParameter("sweep", int, description="Only this sweep's trials.")]


@extend_schema_view(list=extend_schema(parameters=_TRIAL_FILTERS))
class SweepTrialViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A sweep's trials, read-only (the sweep's own detail nests them too)."""

    serializer_class = SweepTrialSerializer

    def get_queryset(self) -> QuerySet[Any]:
        qs = SweepTrial.objects.select_related("tier_config", "launch_profile", "series")
        sweep = self.request.query_params.get("sweep")
        if sweep:
            qs = qs.filter(sweep_id=parse_id(sweep, "sweep"))
        return qs.order_by("sweep_id", "index")
