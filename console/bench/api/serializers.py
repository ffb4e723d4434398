from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.bench import services
from console.bench.choices import Preset, Verdict
from console.bench.models import BenchmarkRun, RequestSample, RunSeries
from console.bench.presets import PRESETS, preset_workload
from console.bench.results import SAMPLE_FIELDS
from console.core.fields import IdRelatedField, NamedChoiceField
from console.fleet.models import Endpoint
from loadgen import SpecError, from_seed003_settings

_PROGRESS = ["percent", "elapsed_s", "requests_done", "errors", "current_p99_ttft_s"]


class ProgressSerializer(serializers.Serializer):
    percent = serializers.FloatField(source="progress_percent")
    elapsed_s = serializers.FloatField()
    requests_done = serializers.IntegerField()
    # DRF's metaclass moves declared fields off the class, so this does not shadow
    # Serializer.errors; the stubs do not model that.
    errors = serializers.IntegerField()  # type: ignore[assignment]
    current_p99_ttft_s = serializers.FloatField(allow_null=True)


class BenchmarkRunSerializer(serializers.ModelSerializer):
    """A run with its live progress and, once finished, its summaries (seconds throughout)."""

    url = serializers.HyperlinkedIdentityField(view_name="benchmarkrun-detail")
    display = serializers.CharField(read_only=True)
    endpoint = IdRelatedField(queryset=Endpoint.objects.all())
    endpoint_name = serializers.CharField(source="endpoint.name", read_only=True)
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    progress = ProgressSerializer(source="*", read_only=True)
    model = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="Blank: the endpoint's default model.",
    )
    preset = NamedChoiceField(
        choices=Preset.choices,
        required=False,
        default=Preset.CUSTOM,
        help_text=(
            "smoke / mixed-tiers / step-ladder fill the workload in; custom needs `workload`."
        ),
    )
    workload = serializers.JSONField(
        required=False,
        help_text="WorkloadSpec fields (concurrency | rate | stages, requests | duration_s, "
        "prompt_tokens, max_tokens, tier_mix, slo_ttft_ms, ...); "
        "base_url and model come from the endpoint.",
    )
    tier_profiles = serializers.JSONField(
        required=False,
        help_text=(
            'Per-tier shapes: {"online": {"weight": 0.7, "prompt_tokens": 128, "max_tokens": 64}}.'
        ),
    )
    seed003_settings = serializers.JSONField(
        write_only=True,
        required=False,
        help_text="Seed 003's client settings.json, imported as the workload.",
    )
    slo = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkRun
        fields = [
            "id",
            "url",
            "display",
            "label",
            "notes",
            "endpoint",
            "endpoint_name",
            "model",
            "preset",
            "workload",
            "tier_profiles",
            "seed003_settings",
            "slo",
            "status",
            "status_reason",
            "cancel_requested",
            "progress",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "measured_from",
            "measured_to",
            "config_snapshot",
            "summary",
            "timeseries",
            "validity",
            "error_breakdown",
            "conditions",
            "series",
        ]
        read_only_fields = [
            "status",
            "status_reason",
            "cancel_requested",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "measured_from",
            "measured_to",
            "config_snapshot",
            "summary",
            "timeseries",
            "validity",
            "error_breakdown",
            "conditions",
            "series",
        ]

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                "ttft_ms": {"type": "number", "nullable": True},
                "tpot_ms": {"type": "number", "nullable": True},
            },
        }
    )
    def get_slo(self, obj: BenchmarkRun) -> dict[str, float | None]:
        return obj.slo

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        endpoint: Endpoint = attrs["endpoint"]
        model = attrs.get("model") or services.default_model(endpoint)
        if not model:
            raise serializers.ValidationError(
                {"model": ["required: the endpoint names no default model"]}
            )
        attrs["model"] = model
        preset = attrs.get("preset", Preset.CUSTOM)
        settings = attrs.pop("seed003_settings", None)
        workload = attrs.get("workload")
        if workload is not None and not isinstance(workload, dict):
            raise serializers.ValidationError({"workload": ["must be an object"]})
        if settings is not None:
            if not isinstance(settings, dict):
                raise serializers.ValidationError({"seed003_settings": ["must be an object"]})
            try:
                workload = from_seed003_settings(
                    settings, base_url=endpoint.base_url, model=model
                ).to_dict()
            except SpecError as exc:
                raise serializers.ValidationError({"seed003_settings": [str(exc)]}) from None
            attrs["preset"] = Preset.SEED003_SETTINGS
            workload.update(
                {k: v for k, v in (attrs.get("workload") or {}).items() if k.startswith("slo_")}
            )
        elif preset in PRESETS:
            base, profiles = preset_workload(preset, endpoint.base_url, model)
            workload = {**base, **(workload or {})}
            attrs.setdefault("tier_profiles", profiles)
        elif workload is None:
            raise serializers.ValidationError(
                {"workload": ["required unless a preset or seed003_settings is given"]}
            )
        attrs["workload"] = workload
        return attrs

    def create(self, validated_data: dict[str, Any]) -> BenchmarkRun:
        request = self.context.get("request")
        try:
            return services.create_run(
                endpoint=validated_data["endpoint"],
                workload=validated_data["workload"],
                user=getattr(request, "user", None),
                request=request,
                model=validated_data["model"],
                preset=validated_data.get("preset", Preset.CUSTOM),
                tier_profiles=validated_data.get("tier_profiles") or None,
                label=validated_data.get("label", ""),
                notes=validated_data.get("notes", ""),
            )
        except services.RunError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None
        except ValueError as exc:  # tier profiles: "tier_profiles.online.weight: ..."
            field, _, message = str(exc).partition(": ")
            raise serializers.ValidationError({field: [message or str(exc)]}) from None


class RequestSampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = RequestSample
        fields = list(SAMPLE_FIELDS)  # the same columns as the CSV export


class MetricDeltaSerializer(serializers.Serializer):
    metric = serializers.CharField()
    before = serializers.FloatField(allow_null=True, help_text="Mean over side A's runs.")
    after = serializers.FloatField(allow_null=True, help_text="Mean over side B's runs.")
    delta = serializers.FloatField(allow_null=True)
    delta_pct = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    verdict = serializers.CharField()
    runs_a = serializers.IntegerField()
    runs_b = serializers.IntegerField()
    method = serializers.CharField(
        help_text="'t interval over runs', or 'within one run ...' (one run per side)."
    )
    provisional = serializers.BooleanField(help_text="A side has one run: no run-to-run noise.")
    higher_is_better = serializers.BooleanField()


class EstimateSerializer(serializers.Serializer):
    key = serializers.CharField(help_text='"online.ttft_p99", "overall.rps", ...')
    # A declared field, moved off the class by DRF's metaclass: Field.label stays intact.
    label = serializers.CharField()  # type: ignore[assignment]
    kind = serializers.CharField(help_text="ratio (compared as B/A) or rate (as B - A, shares)")
    unit = serializers.CharField()
    higher_is_better = serializers.BooleanField()
    before = serializers.FloatField(allow_null=True, help_text="Mean over A's runs.")
    after = serializers.FloatField(allow_null=True, help_text="Mean over B's runs.")
    change = serializers.FloatField(allow_null=True, help_text="ratio: B/A - 1; rate: B - A.")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    call = serializers.CharField(
        help_text="better, worse, no clear change, undecided, or not enough data (no runs)."
    )
    runs_a = serializers.IntegerField()
    runs_b = serializers.IntegerField()
    provisional = serializers.BooleanField()
    runs_needed = serializers.IntegerField(
        allow_null=True, help_text="Runs a side that would decide it (undecided only)."
    )
    slo = serializers.FloatField(allow_null=True)
    above_slo = serializers.BooleanField()
    text = serializers.CharField()


class DecisionSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=Verdict.choices)
    headline = serializers.CharField(
        help_text='The outcome as said first: "not enough data: about 4 more runs a side ...".'
    )
    text = serializers.CharField(help_text="The reason: the figures behind the outcome.")
    objectives = EstimateSerializer(many=True)
    guardrails = EstimateSerializer(many=True)
    breaches = serializers.ListField(child=serializers.CharField())
    disagree = serializers.ListField(
        child=serializers.CharField(), help_text="mixed: the objectives that disagree."
    )
    more_runs = serializers.IntegerField(
        allow_null=True, help_text="not enough data: runs to add a side (power calculation)."
    )
    provisional = serializers.BooleanField()
    confidence = serializers.FloatField(help_text="Level of each figure's call interval.")


class SideValiditySerializer(serializers.Serializer):
    line = serializers.CharField(
        help_text="The side's one line, where a flag moves a figure the decision reads."
    )
    summary = serializers.CharField()
    details = serializers.ListField(child=serializers.CharField())
    affects = serializers.BooleanField()


class TierComparisonSerializer(serializers.Serializer):
    overall = serializers.CharField(help_text="The tier's decision's outcome.")
    decision = DecisionSerializer(allow_null=True, help_text="The tier's decision.")
    metrics = MetricDeltaSerializer(many=True)
    throughput = serializers.DictField(
        child=serializers.DictField(child=serializers.FloatField(allow_null=True))
    )


class ConfigDiffRowSerializer(serializers.Serializer):
    path = serializers.CharField()
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)


class ConditionRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    a = serializers.JSONField(allow_null=True)
    b = serializers.JSONField(allow_null=True)
    differs = serializers.BooleanField()


class SideSerializer(serializers.Serializer):
    ref = serializers.CharField(help_text="The run id, or s<id> for a series.")
    # A declared field, moved off the class by DRF's metaclass: Field.label stays intact.
    label = serializers.CharField()  # type: ignore[assignment]
    series = serializers.IntegerField(allow_null=True)
    runs = serializers.ListField(
        child=serializers.IntegerField(), help_text="The finished runs compared."
    )
    total = serializers.IntegerField(help_text="The side's runs in all, finished or not.")


class ComparisonSerializer(serializers.Serializer):
    a = serializers.IntegerField(allow_null=True, help_text="Side A's first run id.")
    b = serializers.IntegerField(allow_null=True, help_text="Side B's first run id.")
    side_a = SideSerializer()
    side_b = SideSerializer()
    objective = serializers.DictField(
        child=serializers.CharField(), help_text="The declared objective: {value, label}."
    )
    decision = DecisionSerializer(
        help_text="The overall decision: the objective and guardrails (docs/benchmarks.md)."
    )
    provisional = serializers.BooleanField(help_text="A side has a single run.")
    confidence = serializers.FloatField(
        help_text="Level of each metric's interval: a tier's intervals hold together at 95%."
    )
    tiers = serializers.DictField(
        child=TierComparisonSerializer(), help_text="Per tier and 'overall': B minus A, seconds."
    )
    config_diff = ConfigDiffRowSerializer(many=True)
    conditions = ConditionRowSerializer(many=True)
    validity = serializers.DictField(
        child=SideValiditySerializer(), help_text="Per side (A, B): its validity flags."
    )
    notes = serializers.ListField(child=serializers.CharField())
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="The notes and each side's validity line."
    )


class RunSeriesSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="runseries-detail")
    display = serializers.CharField(read_only=True)
    ref = serializers.CharField(read_only=True)
    runs = serializers.SerializerMethodField()
    partner: serializers.PrimaryKeyRelatedField[RunSeries] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )

    class Meta:
        model = RunSeries
        fields = [
            "id",
            "url",
            "display",
            "ref",
            "label",
            "side",
            "partner",
            "template",
            "repeats",
            "cancel_requested",
            "created_at",
            "runs",
        ]
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "status": {"type": "string"}},
            },
        }
    )
    def get_runs(self, obj: RunSeries) -> list[dict[str, Any]]:
        return [
            {"id": pk, "status": st}
            for pk, st in obj.runs.order_by("pk").values_list("pk", "status")
        ]


class RepeatSerializer(serializers.Serializer):
    repeats = serializers.IntegerField(
        min_value=1, max_value=20, default=3, help_text="Runs to make (1-20)."
    )


class RepeatPairSerializer(RepeatSerializer):
    a = serializers.PrimaryKeyRelatedField(
        queryset=BenchmarkRun.objects.all(), help_text="Run whose setup side A repeats."
    )
    b = serializers.PrimaryKeyRelatedField(
        queryset=BenchmarkRun.objects.all(), help_text="Run whose setup side B repeats."
    )


class RepeatPairResultSerializer(serializers.Serializer):
    a = RunSeriesSerializer()
    b = RunSeriesSerializer()
    compare = serializers.CharField(help_text="The compare call for the two series.")
