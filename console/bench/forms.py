"""The custom run form: a workload by hand, or seed 003's settings.json pasted or uploaded."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from console.bench import services
from console.bench.choices import Preset
from console.fleet.models import Endpoint
from loadgen import SpecError, from_seed003_settings, parse_stages, parse_tier_mix

MAX_SETTINGS_BYTES = 256 * 1024


LOAD_MODES = [
    ("concurrency", "Fixed concurrency"),
    ("rate", "Request rate"),
    ("stages", "Step ladder"),
]


class WorkloadFields(forms.Form):
    """A custom workload's fields and how they become a WorkloadSpec dict: the run form's and
    the sweep form's (console/bench/sweeps/forms.py) one definition."""

    load = forms.ChoiceField(
        choices=LOAD_MODES,
        required=False,
        initial="concurrency",
        widget=forms.RadioSelect,
        label="Load",
        help_text="One load shape per run; only the chosen one's field is used.",
    )
    concurrency = forms.IntegerField(min_value=1, required=False, initial=8)
    rate = forms.FloatField(min_value=0.001, required=False, help_text="Requests per second.")
    arrival = forms.ChoiceField(
        choices=[("poisson", "Poisson"), ("constant", "constant")], initial="poisson"
    )
    stages = forms.CharField(
        required=False, help_text="Step ladder, e.g. 32:10,128:15,256:15 (concurrency:seconds)."
    )
    requests = forms.IntegerField(min_value=1, required=False, initial=50)
    duration_s = forms.FloatField(min_value=0.1, required=False, label="Duration (s)")
    warmup_s = forms.FloatField(min_value=0, required=False, initial=0, label="Warmup (s)")
    prompt_tokens = forms.IntegerField(min_value=1, initial=128)
    max_tokens = forms.IntegerField(min_value=1, initial=128)
    shared_prefix_tokens = forms.IntegerField(min_value=0, initial=0)
    tier_mix = forms.CharField(required=False, help_text="e.g. online=0.7,batch=0.2,offline=0.1")
    stream = forms.BooleanField(required=False, initial=True)
    temperature = forms.FloatField(required=False, min_value=0)
    slo_ttft_ms = forms.FloatField(required=False, min_value=0, label="SLO: TTFT (ms)")
    slo_tpot_ms = forms.FloatField(required=False, min_value=0, label="SLO: TPOT (ms)")

    def custom_workload(self, data: dict[str, Any], base_url: str, model: str) -> dict[str, Any]:
        """The fields' workload, validated as a run would store it; {} after adding the
        errors (each on the field that caused it)."""
        try:
            workload = self._workload_fields(data)
        except SpecError as exc:
            self._add_spec_error(str(exc))
            return {}
        return self.validated(workload, data, base_url, model)

    def validated(
        self, workload: dict[str, Any], data: dict[str, Any], base_url: str, model: str
    ) -> dict[str, Any]:
        for slo in ("slo_ttft_ms", "slo_tpot_ms"):
            if data.get(slo) is not None:
                workload[slo] = data[slo]
        try:
            return services.validate_workload({**workload, "base_url": base_url, "model": model})
        except services.RunError as exc:
            self._add_spec_error(f"{exc.field.removeprefix('workload.')}: {exc.message}")
            return {}

    def _workload_fields(self, data: dict[str, Any]) -> dict[str, Any]:
        stages = parse_stages(data.get("stages") or "")
        workload: dict[str, Any] = {
            "prompt_tokens": data["prompt_tokens"],
            "max_tokens": data["max_tokens"],
            "shared_prefix_tokens": data["shared_prefix_tokens"],
            "stream": bool(data.get("stream")),
            "temperature": data.get("temperature"),
            "warmup_s": data.get("warmup_s") or 0.0,
            "arrival": data["arrival"],
            "tier_mix": parse_tier_mix(data.get("tier_mix") or ""),
        }
        mode = self._load_mode(data, bool(stages))
        if mode == "stages":
            workload["stages"] = [
                {"concurrency": s.concurrency, "duration_s": s.duration_s} for s in stages
            ]
        elif mode == "rate":
            workload["rate"] = data["rate"]
        else:
            workload["concurrency"] = data["concurrency"]
        if not stages:
            if data.get("duration_s"):
                workload["duration_s"] = data["duration_s"]
            else:
                workload["requests"] = data.get("requests")
        return workload

    def _load_mode(self, data: dict[str, Any], has_stages: bool) -> str:
        """The load shape the operator chose (or, from a script that does not say, the one
        field given); a missing value or two shapes at once is an error naming the field."""
        given = {
            "concurrency": data.get("concurrency") is not None,
            "rate": data.get("rate") is not None,
            "stages": has_stages,
        }
        mode = data.get("load") or ""
        if not mode:
            chosen = [name for name, present in given.items() if present]
            if len(chosen) > 1:
                raise SpecError(
                    "load: give one load shape (concurrency, rate or stages), "
                    f"not {' and '.join(chosen)}"
                )
            mode = chosen[0] if chosen else "concurrency"
        if not given[mode]:
            raise SpecError(f"{mode}: required for the {dict(LOAD_MODES)[mode].lower()} load")
        return mode

    def _add_spec_error(self, message: str) -> None:
        field, _, rule = message.partition(": ")
        field = field.split(".")[0].split("[")[0]
        if field in self.fields and rule:
            self.add_error(field, rule)
        else:
            self.add_error(None, message)


class RunForm(WorkloadFields):
    field_order = ["endpoint", "model", "label"]

    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.order_by("kind", "name"))
    model = forms.CharField(
        max_length=200, required=False, help_text="Blank: the endpoint's default model."
    )
    label = forms.CharField(max_length=200, required=False)
    settings_json = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        label="Seed 003 settings.json",
        help_text=(
            "Paste a client settings.json (api / load_test / workload); "
            "it replaces the load fields above."
        ),
    )
    settings_file = forms.FileField(required=False, label="…or upload it")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def _settings(self) -> dict[str, Any] | None:
        text = self.cleaned_data.get("settings_json") or ""
        upload = self.cleaned_data.get("settings_file")
        if upload is not None:
            if upload.size > MAX_SETTINGS_BYTES:
                self.add_error("settings_file", "larger than 256 KiB")
                return None
            text = upload.read().decode("utf-8", errors="replace")
        if not text.strip():
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            self.add_error(
                "settings_file" if upload else "settings_json",
                f"not JSON: {exc.msg} (line {exc.lineno})",
            )
            return None
        if not isinstance(data, dict):
            self.add_error("settings_json", "must be a JSON object")
            return None
        return data

    def clean(self) -> dict[str, Any]:
        # Form.clean returns cleaned_data itself; the stubs type that as optional.
        super().clean()
        data = self.cleaned_data
        endpoint: Endpoint | None = data.get("endpoint")
        if endpoint is None or self.errors:
            return data
        model = data.get("model") or services.default_model(endpoint)
        if not model:
            self.add_error("model", "required: the endpoint names no default model")
            return data
        data["model"] = model
        settings = self._settings()
        if self.errors:
            return data
        if settings is None:
            data["preset"] = Preset.CUSTOM
            data["workload"] = self.custom_workload(data, endpoint.base_url, model)
            return data
        try:
            workload = from_seed003_settings(settings, base_url=endpoint.base_url, model=model)
        except SpecError as exc:
            self._add_spec_error(str(exc))
            return data
        data["preset"] = Preset.SEED003_SETTINGS
        data["workload"] = self.validated(workload.to_dict(), data, endpoint.base_url, model)
        return data


class QuickRunForm(forms.Form):
    """The one-click buttons: an endpoint and a preset, nothing else."""

    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all())
    preset = forms.ChoiceField(
        choices=[
            (p.value, p.label) for p in Preset if p not in (Preset.CUSTOM, Preset.SEED003_SETTINGS)
        ]
    )
