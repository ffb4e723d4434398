"""Browser forms of the fleet pages. Writes go through the workflows (services.py,
gateway_keys.py), like the API's."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from console.core.tiers import SEED_TIERS
from console.fleet import gateway_keys
from console.fleet.choices import EndpointKind
from console.fleet.errors import FleetError
from console.fleet.models import Endpoint, Node, validate_base_url, validate_endpoint_name


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


class NodeForm(forms.Form):
    name = forms.SlugField(max_length=100, help_text="Letters, digits, '-' and '_'.")
    labels = forms.CharField(required=False, help_text="Comma-separated, e.g. h200, zone-a")

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if Node.objects.filter(name=name).exists():
            raise forms.ValidationError("A node with this name exists.")
        return name

    def clean_labels(self) -> list[str]:
        return _split(self.cleaned_data.get("labels") or "")


LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,49}$")


class NodeLabelsForm(forms.Form):
    labels = forms.CharField(
        required=False, max_length=1000, help_text="Comma-separated, e.g. h200, zone-a"
    )

    def clean_labels(self) -> list[str]:
        labels = _split(self.cleaned_data.get("labels") or "")
        for label in labels:
            if not LABEL_RE.match(label):
                raise forms.ValidationError(
                    f"{label!r}: up to 50 letters, digits, '.', '_', ':', '/' or '-'"
                )
        if len(labels) > 50:
            raise forms.ValidationError("at most 50 labels")
        return labels


class EndpointForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        validators=[validate_endpoint_name],
        help_text="Letters, digits, '.', '_' or '-', e.g. gpu-a-vllm",
    )
    base_url = forms.CharField(
        max_length=500,
        validators=[validate_base_url],
        help_text="As the OpenAI SDK takes it, ending in /v1, e.g. http://host:8000/v1",
    )
    api_key = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Stored encrypted; never shown again. Leave empty to keep the current key.",
    )
    kind = forms.ChoiceField(choices=EndpointKind.choices, initial=EndpointKind.EXTERNAL)
    models = forms.CharField(
        required=False, help_text="Comma-separated model IDs (or fetch them later)"
    )
    default_model = forms.CharField(required=False, max_length=200)

    def __init__(self, *args: Any, instance: Endpoint | None = None, **kwargs: Any) -> None:
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "name": instance.name,
                "base_url": instance.base_url,
                "kind": instance.kind,
                "models": ", ".join(instance.models),
                "default_model": instance.default_model,
            }
        super().__init__(*args, **kwargs)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        clash = Endpoint.objects.filter(name=name)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise forms.ValidationError("An endpoint with this name exists.")
        return name

    def clean_models(self) -> list[str]:
        return _split(self.cleaned_data.get("models") or "")


class EnvImportForm(forms.Form):
    text = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="export X_BASE_URL=...  export X_API_KEY=...  export X_MODEL_ONLINE=...",
    )
    kind = forms.ChoiceField(choices=EndpointKind.choices, initial=EndpointKind.EXTERNAL)


class GatewayKeyForm(forms.Form):
    name = forms.CharField(max_length=100)
    tiers = forms.CharField(
        initial=", ".join(SEED_TIERS), help_text="Comma-separated tiers the key may use"
    )
    default_tier = forms.CharField(max_length=50, initial=SEED_TIERS[0])
    nodes = forms.ModelMultipleChoiceField(
        queryset=Node.objects.all(), required=False, help_text="None selected: valid on every node"
    )

    def clean_tiers(self) -> list[str]:
        return _split(self.cleaned_data.get("tiers") or "")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "tiers" in data and "default_tier" in data:
            try:
                gateway_keys.check_tiers(data["tiers"], data["default_tier"])
            except FleetError as exc:
                self.add_error(exc.field, exc.message)
        return data
