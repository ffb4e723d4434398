"""Serializers of /api/v1/sweeps/ and /api/v1/sweep-trials/: every object with id, url and
display, every choice as {value, label}; a sweep's body in is plain values."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.bench.choices import Preset
from console.bench.presets import PRESETS
from console.bench.sweeps.choices import Objective, SweepKind, SweepMode, SweepStatus, TrialStatus
from console.bench.sweeps.inputs import DEFAULT_REPEATS, MAX_REPEATS
from console.bench.sweeps.models import Sweep, SweepTrial
from console.core.fields import IdRelatedField, NamedChoiceField
from console.fleet.models import Endpoint, Node
from console.tuning.rollouts.api.views import RolloutDetailSerializer


def choice_field(choices: type[models.TextChoices], source: str | None = None) -> Any:
    """A read-only {value, label} rendering of a choice."""

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                "value": {"type": "string", "enum": list(choices.values)},
                "label": {"type": "string"},
            },
            "required": ["value", "label"],
        }
    )
    class ChoiceObject(serializers.Field):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(read_only=True, **kwargs)

        def to_representation(self, value: Any) -> dict[str, str]:
            return {"value": value, "label": str(choices(value).label) if value else ""}

    return ChoiceObject(source=source) if source else ChoiceObject()


_PRESET_CHOICES = [(Preset.CUSTOM.value, Preset.CUSTOM.label)] + [
    (key, p.title) for key, p in PRESETS.items()
]


class SweepTrialSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="sweeptrial-detail")
    display = serializers.CharField(read_only=True)
    status = choice_field(TrialStatus)
    version = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()

    class Meta:
        model = SweepTrial
        fields = [
            "id",
            "url",
            "display",
            "sweep",
            "index",
            "is_base",
            "values",
            "document",
            "tier_config",
            "launch_profile",
            "version",
            "status",
            "series",
            "runs",
            "metrics",
            "feasible",
            "violations",
            "objective_value",
            "apply_s",
            "bench_s",
            "error",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_version(self, obj: SweepTrial) -> str | None:
        version = obj.version
        return None if version is None else str(version.label)

    @extend_schema_field({"type": "array", "items": {"type": "integer"}})
    def get_runs(self, obj: SweepTrial) -> list[int]:
        """The benchmark runs of its repeats (compare any two: /api/v1/benchmarks/compare/)."""
        if obj.series_id is None:
            return []
        return list(obj.series.runs.order_by("pk").values_list("pk", flat=True))  # type: ignore[union-attr]


_SWEEP_FIELDS = [
    "id",
    "url",
    "display",
    "name",
    "node",
    "node_name",
    "endpoint",
    "endpoint_name",
    "model",
    "kind",
    "mode",
    "base_tier_config",
    "base_launch_profile",
    "base_version",
    "variables",
    "preset",
    "workload",
    "tier_profiles",
    "repeats",
    "constraints",
    "objective",
    "status",
    "status_reason",
    "cancel_requested",
    "trials_planned",
    "trials_done",
    "eta_s",
    "heartbeat_at",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "best_trial",
    "adopted_trial",
    "adopted_rollout",
    "restored",
]


class SweepSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="sweep-detail")
    display = serializers.CharField(read_only=True)
    node_name = serializers.CharField(source="node.name", read_only=True)
    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    kind = choice_field(SweepKind)
    mode = choice_field(SweepMode)
    preset = choice_field(Preset)
    objective = choice_field(Objective)
    status = choice_field(SweepStatus)
    base_version = serializers.SerializerMethodField()
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )

    class Meta:
        model = Sweep
        fields = _SWEEP_FIELDS
        read_only_fields = _SWEEP_FIELDS

    def get_base_version(self, obj: Sweep) -> str | None:
        version = obj.base_version
        return None if version is None else str(version.label)


class SweepDetailSerializer(SweepSerializer):
    trials = SweepTrialSerializer(many=True, read_only=True)

    class Meta(SweepSerializer.Meta):
        fields = [*_SWEEP_FIELDS, "trials"]
        read_only_fields = fields


class SweepCreateSerializer(serializers.Serializer):
    """Types only; services.create_sweep checks the rest and names the field."""

    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    node = IdRelatedField(queryset=Node.objects.all(), help_text="The node swept.")
    endpoint = IdRelatedField(
        queryset=Endpoint.objects.all(),
        required=False,
        allow_null=True,
        help_text="Where the benchmarks go; default: the node's gateway endpoint.",
    )
    model = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Default: the endpoint's."
    )
    kind = NamedChoiceField(
        choices=SweepKind.choices, help_text="What is swept: the node's tier config or profile."
    )
    mode = NamedChoiceField(choices=SweepMode.choices, default=SweepMode.ONE)
    variables = serializers.JSONField(
        help_text='[{"path": "scheduler.queues.online.max_waiting_time_ms", "values": [1, 5]}]; '
        "a launch profile's path is the snake_case argument (max_num_seqs)."
    )
    preset = NamedChoiceField(choices=_PRESET_CHOICES, default=Preset.CUSTOM)
    workload = serializers.JSONField(
        required=False, help_text="WorkloadSpec fields, over the preset's (custom: required)."
    )
    tier_profiles = serializers.JSONField(required=False)
    repeats = serializers.IntegerField(
        default=DEFAULT_REPEATS,
        min_value=1,
        max_value=MAX_REPEATS,
        help_text="Runs per trial (default 3: a trial's decision against the base needs "
        "run-to-run noise measured).",
    )
    constraints = serializers.JSONField(
        required=False,
        help_text='{"min_throughput_rps": 4, "max_error_rate": 0.01, '
        '"max_ttft_p99_ms": {"online": 500}}',
    )
    objective = NamedChoiceField(choices=Objective.choices, default=Objective.MIN_ONLINE_TTFT_P99)


class AdoptSerializer(serializers.Serializer):
    trial = serializers.IntegerField(min_value=0, help_text="The trial's index in the sweep.")
    confirm_undecided = serializers.BooleanField(
        default=False,
        help_text="Required (true) to adopt a trial whose decision against the base is not "
        '"better": without it such an adoption is refused (400, naming this field).',
    )


class AdoptResultSerializer(serializers.Serializer):
    sweep = SweepDetailSerializer()
    rollout = RolloutDetailSerializer()
