"""The new-sweep form: node, kind and base version, mode, up to three variables with their
values, a workload (a preset, or the run form's custom fields), repeats, constraints and an
objective. It builds the same document the API receives (services.create_sweep validates
both); an error the service raises names a field, and `add_service_error` puts it next to it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from django import forms
from django.db.models import Q

from console.bench.choices import Preset
from console.bench.forms import WorkloadFields
from console.bench.presets import PRESETS
from console.bench.sweeps.choices import Objective, SweepKind, SweepMode
from console.bench.sweeps.inputs import DEFAULT_REPEATS
from console.bench.sweeps.spec import FIXED_ARGS
from console.fleet.models import Node
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.vllm_args import FIELD_NAMES
from loadgen import SpecError
from scheduler import ConfigError, parse_config
from scheduler.config import effective_dict

VARIABLE_SLOTS = 3
CUSTOM = ""  # the preset field's "custom fields" choice
CUSTOM_PRESET = Preset.CUSTOM.value
WORKLOAD_FIELDS = (
    "load",
    "concurrency",
    "rate",
    "arrival",
    "stages",
    "requests",
    "duration_s",
    "warmup_s",
    "prompt_tokens",
    "max_tokens",
    "shared_prefix_tokens",
    "tier_mix",
    "stream",
    "temperature",
    "slo_ttft_ms",
    "slo_tpot_ms",
)
# Launch arguments worth sweeping (the others name what is served, not how).
SWEEPABLE_ARGS = tuple(name for name in FIELD_NAMES if name not in FIXED_ARGS)


def numeric_paths(document: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of a document's numeric leaves (booleans are not numbers here)."""
    for key, value in document.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            yield from numeric_paths(value, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield path


def tier_config_paths(config: Mapping[str, Any]) -> list[str]:
    """The numeric fields of a tier config, defaults filled in: what a sweep may vary."""
    try:
        full = effective_dict(parse_config(dict(config)))
    except ConfigError:
        full = dict(config)
    return list(numeric_paths(full))


def parse_value(text: str) -> Any:
    """One value as typed: an integer, a number, true/false, else the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def parse_values(text: str) -> list[Any]:
    """ "1, 5, 10" -> [1, 5, 10]; blanks between commas are ignored."""
    return [parse_value(part.strip()) for part in text.split(",") if part.strip()]


def parse_caps(text: str) -> dict[str, float]:
    """ "online=500, batch=2000" -> {"online": 500.0, "batch": 2000.0}; raises ValueError."""
    caps: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        tier, sep, raw = part.partition("=")
        if not sep or not tier.strip():
            raise ValueError(f"{part!r}: write tier=milliseconds, e.g. online=500")
        try:
            caps[tier.strip()] = float(raw)
        except ValueError:
            raise ValueError(f"{part!r}: {raw.strip()!r} is not a number") from None
    return caps


class NodeSelect(forms.Select):
    """Each node's option says which base versions it has, so the page's script shows only
    the nodes that have one of the chosen kind."""

    def create_option(self, name: str, value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, *args, **kwargs)
        node = getattr(value, "instance", None)
        if isinstance(node, Node):
            tier, profile = current_versions(node)
            option["attrs"]["data-tier-config"] = tier.label if tier else ""
            option["attrs"]["data-launch-profile"] = profile.label if profile else ""
        return option


def current_versions(node: Node) -> tuple[TierConfigVersion | None, LaunchProfileVersion | None]:
    """The versions a sweep of the node starts from: the ones it is told to run (as
    inputs.base_versions takes them)."""
    return node.desired_tier_config, node.desired_launch_profile


class NodeChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        tier, profile = current_versions(obj)
        kinds = [
            f"{what} {v.label}"
            for what, v in (("tier config", tier), ("launch profile", profile))
            if v is not None
        ]
        return f"{obj.name} ({', '.join(kinds)})"


def _path_field(slot: int) -> forms.CharField:
    return forms.CharField(
        required=slot == 1,
        max_length=200,
        label=f"Variable {slot}",
        widget=forms.TextInput(attrs={"list": "sweep-paths", "autocomplete": "off"}),
        help_text=(
            "Tier config: a dotted path (scheduler.queues.online.max_waiting_time_ms); "
            "launch profile: an argument (max_num_seqs)."
            if slot == 1
            else "Grid or coordinate descent only."
        ),
    )


def _values_field(slot: int) -> forms.CharField:
    return forms.CharField(
        required=slot == 1,
        label=f"Values of variable {slot}",
        help_text="Comma-separated, e.g. 1, 5, 10" if slot == 1 else "",
    )


class SweepForm(WorkloadFields):
    field_order = [
        "name",
        "node",
        "kind",
        "mode",
        *(f"var{i}_{part}" for i in range(1, VARIABLE_SLOTS + 1) for part in ("path", "values")),
        "preset",
        *WORKLOAD_FIELDS,
        "repeats",
        "min_throughput_rps",
        "max_ttft_p99_ms",
        "max_error_rate",
        "objective",
    ]

    name = forms.CharField(max_length=200, required=False)
    node = NodeChoice(
        queryset=Node.objects.filter(
            Q(desired_tier_config__isnull=False) | Q(desired_launch_profile__isnull=False)
        )
        .select_related("desired_tier_config", "desired_launch_profile")
        .order_by("name"),
        widget=NodeSelect,
        help_text="Only nodes with a version of the chosen kind; the sweep starts from it "
        "(the base) and puts the node back on it at the end.",
    )
    kind = forms.ChoiceField(
        choices=SweepKind.choices, initial=SweepKind.TIER_CONFIG, widget=forms.RadioSelect
    )
    mode = forms.ChoiceField(choices=SweepMode.choices, initial=SweepMode.ONE)
    var1_path, var1_values = _path_field(1), _values_field(1)
    var2_path, var2_values = _path_field(2), _values_field(2)
    var3_path, var3_values = _path_field(3), _values_field(3)
    preset = forms.ChoiceField(
        choices=[(key, p.title) for key, p in PRESETS.items()]
        + [(CUSTOM, "Custom: the fields below")],
        required=False,
        initial="mixed-tiers",
        label="Workload",
    )
    repeats = forms.IntegerField(
        min_value=1,
        max_value=10,
        initial=DEFAULT_REPEATS,
        help_text="Benchmark runs per trial (1-10; 3 or more let a trial be decided better "
        "than the base).",
    )
    min_throughput_rps = forms.FloatField(
        required=False, min_value=0, label="Throughput floor (req/s)"
    )
    max_ttft_p99_ms = forms.CharField(
        required=False,
        label="TTFT P99 caps (ms)",
        help_text="Per tier, e.g. online=500, batch=2000",
    )
    max_error_rate = forms.FloatField(
        required=False, min_value=0, max_value=1, label="Error rate at most (0-1)"
    )
    objective = forms.ChoiceField(choices=Objective.choices, initial=Objective.MIN_ONLINE_TTFT_P99)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A preset needs none of the custom fields; custom ones are checked in clean.
        for name in WORKLOAD_FIELDS:
            self.fields[name].required = False

    def clean(self) -> dict[str, Any]:
        # Form.clean returns cleaned_data itself; the stubs type that as optional.
        super().clean()
        data = self.cleaned_data
        node: Node | None = data.get("node")
        kind = data.get("kind")
        if node is None or not kind:
            return data
        if current_versions(node)[0 if kind == SweepKind.TIER_CONFIG else 1] is None:
            what = "tier config" if kind == SweepKind.TIER_CONFIG else "launch profile"
            self.add_error("node", f"{node.name} has no {what} version to start from")
            return data
        data["variables"] = self._variables(data)
        try:
            data["constraints"] = {
                "min_throughput_rps": data.get("min_throughput_rps"),
                "max_error_rate": data.get("max_error_rate"),
                "max_ttft_p99_ms": parse_caps(data.get("max_ttft_p99_ms") or ""),
            }
        except ValueError as exc:
            self.add_error("max_ttft_p99_ms", str(exc))
        return data

    def _variables(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for slot in range(1, VARIABLE_SLOTS + 1):
            path = (data.get(f"var{slot}_path") or "").strip()
            values = parse_values(data.get(f"var{slot}_values") or "")
            if path and not values:
                self.add_error(f"var{slot}_values", "give at least one value")
            elif values and not path:
                self.add_error(f"var{slot}_path", "name the variable these values are for")
            elif path:
                out.append({"path": path, "values": values})
        return out

    def workload(self) -> tuple[str, dict[str, Any] | None]:
        """(preset, workload): a preset as it is (the service fills it in for the node's
        gateway), or the custom fields' workload; a load-shape error lands on its field."""
        data = self.cleaned_data
        preset = data.get("preset") or CUSTOM
        if preset != CUSTOM:
            return preset, None
        for required in ("prompt_tokens", "max_tokens"):
            if data.get(required) is None:
                self.add_error(required, "required for a custom workload")
        if not self.is_valid():
            return CUSTOM_PRESET, None
        defaults = {"shared_prefix_tokens": 0, "arrival": "poisson"}
        filled = {**data, **{k: v for k, v in defaults.items() if data.get(k) in (None, "")}}
        try:
            workload = self._workload_fields(filled)
        except SpecError as exc:
            self._add_spec_error(str(exc))
            return CUSTOM_PRESET, None
        for slo in ("slo_ttft_ms", "slo_tpot_ms"):
            if data.get(slo) is not None:
                workload[slo] = data[slo]
        return CUSTOM_PRESET, workload

    def document(self) -> dict[str, Any] | None:
        """The sweep as the API receives it; None after putting errors on the fields."""
        preset, workload = self.workload()
        if not self.is_valid():
            return None
        data = self.cleaned_data
        return {
            "name": data.get("name") or "",
            "node": data["node"].pk,
            "kind": data["kind"],
            "mode": data["mode"],
            "variables": data["variables"],
            "preset": preset,
            "workload": workload,
            "repeats": data["repeats"],
            "constraints": data["constraints"],
            "objective": data["objective"],
        }

    def add_service_error(self, field: str, message: str) -> None:
        """A service error naming an API field, shown next to the form's field for it."""
        match = re.fullmatch(r"variables\[(\d+)\]\.(path|values)(.*)", field)
        if match and int(match[1]) < VARIABLE_SLOTS:
            slot, part, rest = int(match[1]) + 1, match[2], match[3]
            item = re.fullmatch(r"\[(\d+)\]", rest)
            values = parse_values(str(self.data.get(f"var{slot}_values", "")))
            if item and int(item[1]) < len(values):
                message = f"value {values[int(item[1])]!r}: {message}"
            self.add_error(f"var{slot}_{part}", message)
            return
        name = field.removeprefix("constraints.").split(".")[0]
        if field.startswith("workload."):
            self._add_spec_error(f"{field.removeprefix('workload.')}: {message}")
        elif field == "variables":  # how many variables or trials: what the mode allows
            self.add_error("mode", message)
        elif field in ("endpoint", "model"):
            self.add_error("node", message)
        elif name in self.fields:
            self.add_error(name, message)
        else:
            self.add_error(None, f"{field}: {message}" if field else message)
