"""REST API of rollouts: /api/v1/rollouts/ (+ {id}/abort/, {id}/resume/, {id}/rollback/).

Create, list and read; no update or delete (a rollout is a record of what happened). Writes
go through services.py; a broken rule comes back as 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from console.core.fields import IdRelatedField
from console.core.ids import parse_id
from console.core.roles import OPERATOR
from console.fleet.choices import NodeStatus
from console.fleet.models import Node
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.rollouts import probe, services
from console.tuning.rollouts.choices import (
    GuardWhenQuiet,
    NodeSelection,
    RolloutState,
    StaleTargets,
)
from console.tuning.rollouts.models import Rollout, RolloutEvent, RolloutNode
from console.tuning.rollouts.resume import resume_rollout
from console.tuning.rollouts.targets import resolve_nodes, stale_or_unseen


class RolloutNodeSerializer(serializers.ModelSerializer):
    node_name = serializers.CharField(source="node.name", read_only=True)
    node_status = serializers.ChoiceField(
        choices=NodeStatus.choices,
        source="node.status",
        read_only=True,
        help_text="The node's status now, as the fleet page shows it",
    )

    class Meta:
        model = RolloutNode
        fields = [
            "node",
            "node_name",
            "wave",
            "state",
            "error",
            "target_tier_config",
            "target_launch_profile",
            "unset_tier_config",
            "unset_launch_profile",
            "prev_tier_config",
            "prev_launch_profile",
            "prev_applied_tier_config",
            "prev_applied_launch_profile",
            "node_status",
            "applying_at",
            "applied_at",
            "healthy_at",
            "reverted_at",
        ]
        read_only_fields = fields


class RolloutEventSerializer(serializers.ModelSerializer):
    node_name = serializers.CharField(
        source="node.name", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = RolloutEvent
        fields = ["ts", "level", "node", "node_name", "message"]
        read_only_fields = fields


_FIELDS = [
    "id",
    "url",
    "display",
    "kind",
    "rollback_of",
    "tier_config",
    "launch_profile",
    "target",
    "message",
    "node_selection",
    "label",
    "stale_targets",
    "excluded_nodes",
    "canary_count",
    "wave_size",
    "convergence_timeout_s",
    "canary_soak_s",
    "guard_max_ttft_p99_regression_pct",
    "guard_max_error_rate",
    "guard_window_s",
    "guard_tier",
    "guard_when_quiet",
    "guard_probe_s",
    "guard_coverage",
    "guarded_requests",
    "unguarded_waves",
    "state",
    "reason",
    "abort_requested",
    "current_wave",
    "node_count",
    "nodes_done",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
]


class RolloutSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="rollout-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    target = serializers.CharField(source="target_label", read_only=True)
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    guard_coverage = serializers.CharField(
        read_only=True,
        help_text='What the SLO guard stood on: "guarded by N requests", "unguarded (...)", '
        '"not judged yet"; empty for a rollback',
    )
    node_count = serializers.IntegerField(read_only=True, help_text="Nodes in the rollout")
    nodes_done = serializers.IntegerField(read_only=True, help_text="Nodes applied and healthy")

    class Meta:
        model = Rollout
        fields = _FIELDS
        read_only_fields = _FIELDS


class RolloutDetailSerializer(RolloutSerializer):
    nodes = RolloutNodeSerializer(many=True, read_only=True)
    events = RolloutEventSerializer(many=True, read_only=True)

    class Meta(RolloutSerializer.Meta):
        fields = [*_FIELDS, "nodes", "events"]
        read_only_fields = fields


class RolloutCreateSerializer(serializers.Serializer):
    tier_config = IdRelatedField(
        queryset=TierConfigVersion.objects.all(),
        required=False,
        allow_null=True,
        help_text="Tier config version to roll out (this and/or launch_profile).",
    )
    launch_profile = IdRelatedField(
        queryset=LaunchProfileVersion.objects.all(),
        required=False,
        allow_null=True,
        help_text="Launch profile version to roll out; engines restart one wave at a time.",
    )
    node_selection = serializers.ChoiceField(
        choices=NodeSelection.choices, default=NodeSelection.ALL
    )
    nodes = IdRelatedField(
        queryset=Node.objects.all(),
        many=True,
        required=False,
        help_text="With node_selection=nodes.",
    )
    # A declared field, moved off the class by DRF's metaclass: Field.label stays intact.
    label = serializers.CharField(  # type: ignore[assignment]
        required=False, allow_blank=True, max_length=100, help_text="With node_selection=label."
    )
    canary_count = serializers.IntegerField(default=1, min_value=0, max_value=10_000)
    wave_size = serializers.IntegerField(
        default=0,
        min_value=0,
        max_value=10_000,
        help_text="Nodes per wave after the canaries; 0: all the rest at once.",
    )
    stale_targets = serializers.ChoiceField(
        choices=StaleTargets.choices,
        default=StaleTargets.EXCLUDE,
        help_text="Targets stale or never seen: exclude (leave out), refuse (400), include.",
    )
    convergence_timeout_s = serializers.FloatField(
        default=services.DEFAULT_TIMEOUT_S, min_value=1, max_value=services.MAX_TIMEOUT_S
    )
    canary_soak_s = serializers.FloatField(
        default=services.DEFAULT_CANARY_SOAK_S,
        min_value=0,
        max_value=services.MAX_WINDOW_S,
        help_text="How long the canary wave runs, watched, before the next wave; 0: no soak.",
    )
    guard_max_ttft_p99_regression_pct = serializers.FloatField(
        default=services.DEFAULT_GUARD_TTFT_P99_REGRESSION_PCT,
        allow_null=True,
        min_value=0,
        help_text="SLO guard: largest TTFT P99 rise against the minutes before; null: no check.",
    )
    guard_max_error_rate = serializers.FloatField(
        default=services.DEFAULT_GUARD_ERROR_RATE,
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="SLO guard: largest error and rejection rate, 0-1; null: no check.",
    )
    guard_window_s = serializers.FloatField(
        default=services.DEFAULT_GUARD_WINDOW_S, min_value=1, max_value=services.MAX_WINDOW_S
    )
    guard_tier = serializers.CharField(
        required=False,
        max_length=50,
        help_text="Default: the most urgent tier of the tier config rolled out.",
    )
    guard_when_quiet = serializers.ChoiceField(
        choices=GuardWhenQuiet.choices,
        default=GuardWhenQuiet.PROBE,
        help_text="A watched wave too quiet for the guard to judge: probe it with load of its "
        "own through its gateway, or pause and ask (resume or abort).",
    )
    guard_probe_s = serializers.FloatField(
        default=services.DEFAULT_GUARD_PROBE_S,
        min_value=probe.MIN_PROBE_S,
        max_value=probe.MAX_PROBE_S,
        help_text="Seconds of probe load, per probe.",
    )
    message = serializers.CharField(required=False, allow_blank=True, max_length=500)


class TargetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=NodeStatus.choices)
    stale = serializers.BooleanField(help_text="Stale or never seen: left out by default")


_TARGET_QUERY = [
    OpenApiParameter("node_selection", str, enum=NodeSelection.values, default="all"),
    OpenApiParameter("label", str, description="With node_selection=label."),
    OpenApiParameter("nodes", str, description="With node_selection=nodes: ids, comma-separated."),
]


def _raise(exc: services.RolloutError) -> None:
    raise ValidationError({exc.field: [exc.message]}) from None


_STATE = OpenApiParameter(
    "state", str, enum=RolloutState.values, description="Only rollouts in this state"
)


@extend_schema_view(list=extend_schema(parameters=[_STATE]))
class RolloutViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Rollouts and rollbacks; reads need viewer, writes operator."""

    required_role = OPERATOR

    def get_queryset(self) -> QuerySet[Any]:
        qs = Rollout.objects.with_progress()
        if self.action == "retrieve":
            qs = qs.prefetch_related("nodes__node", "events__node")
        state = self.request.query_params.get("state")
        if state and state not in RolloutState.values:
            raise ValidationError({"state": [f"must be one of {', '.join(RolloutState.values)}"]})
        return qs.filter(state=state) if state else qs

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "create":
            return RolloutCreateSerializer
        return RolloutDetailSerializer if self.action != "list" else RolloutSerializer

    def _detail(self, rollout: Rollout, code: int = status.HTTP_200_OK) -> Response:
        obj = self.get_queryset().prefetch_related("nodes__node", "events__node").get(pk=rollout.pk)
        return Response(
            RolloutDetailSerializer(obj, context=self.get_serializer_context()).data, status=code
        )

    @extend_schema(request=RolloutCreateSerializer, responses={201: RolloutDetailSerializer})
    def create(self, request: Request) -> Response:
        """Start a rollout; a worker executes it wave by wave."""
        form = RolloutCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        try:
            rollout = services.create_rollout(
                tier_config=data.pop("tier_config", None),
                launch_profile=data.pop("launch_profile", None),
                selection=data.pop("node_selection"),
                nodes=data.pop("nodes", []),
                user=request.user,
                request=request,
                **data,
            )
        except services.RolloutError as exc:
            _raise(exc)
        return self._detail(rollout, status.HTTP_201_CREATED)

    @extend_schema(parameters=_TARGET_QUERY, responses=TargetSerializer(many=True))
    @action(detail=False, methods=["get"], pagination_class=None)
    def targets(self, request: Request) -> Response:
        """The nodes a selection names, each with its status and whether it is stale or never
        seen (what a rollout leaves out by default): check before starting one."""
        params = request.query_params
        selection = params.get("node_selection") or NodeSelection.ALL
        raw_nodes = [n for n in (params.get("nodes") or "").split(",") if n]
        try:
            ids = [parse_id(n, "nodes") for n in raw_nodes]
            nodes = resolve_nodes(selection, ids, params.get("label", ""))
        except services.RolloutError as exc:
            _raise(exc)
        stale = {n.pk for n in stale_or_unseen(nodes)}
        data = [
            {"id": n.pk, "name": n.name, "status": n.status(), "stale": n.pk in stale}
            for n in nodes
        ]
        return Response(TargetSerializer(data, many=True).data)

    @extend_schema(request=None, responses={200: RolloutDetailSerializer})
    @action(detail=True, methods=["post"])
    def abort(self, request: Request, pk: str | None = None) -> Response:
        """Stop the rollout: what it touched is set back and it ends aborted."""
        rollout = self.get_object()
        try:
            services.abort_rollout(rollout, request.user, request)
        except services.RolloutError as exc:
            _raise(exc)
        return self._detail(rollout)

    @extend_schema(request=None, responses={200: RolloutDetailSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        """Resume a rollout the SLO guard paused (it could not judge a wave): the wave goes
        on unguarded and the next one starts. To roll it back instead, abort it."""
        rollout = self.get_object()
        try:
            resume_rollout(rollout, request.user, request)
        except services.RolloutError as exc:
            _raise(exc)
        return self._detail(rollout)

    @extend_schema(request=None, responses={201: RolloutDetailSerializer})
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, pk: str | None = None) -> Response:
        """Roll back a finished rollout: a new rollback rollout sets each node it changed back
        to the versions it had before. Returns the new rollout."""
        rollout = self.get_object()
        try:
            created = services.rollback_rollout(rollout, request.user, request)
        except services.RolloutError as exc:
            _raise(exc)
        return self._detail(created, status.HTTP_201_CREATED)
