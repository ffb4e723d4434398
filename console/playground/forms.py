"""The playground form: two sides (endpoint, model, tier), the conversation, the parameters."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from console.fleet.models import Endpoint

ROLE_LINE = re.compile(r"^(system|user|assistant):\s?(.*)$", re.I)
TIER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,49}$")
MAX_MESSAGES = 20
MAX_CHARS = 32_000


def parse_conversation(text: str) -> list[dict[str, str]]:
    """`user: ...` / `assistant: ...` / `system: ...` lines start messages (a line without a
    role continues the one before); text with no role line at all is one user message."""
    messages: list[dict[str, str]] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        match = ROLE_LINE.match(line)
        if match:
            messages.append({"role": match.group(1).lower(), "content": match.group(2)})
        elif messages:
            messages[-1]["content"] += "\n" + line
        elif line.strip():
            messages.append({"role": "user", "content": line})
    for message in messages:
        message["content"] = message["content"].strip()
    if not messages or not any(m["content"] for m in messages):
        raise forms.ValidationError("write a prompt, or lines starting with user: / assistant:")
    if len(messages) > MAX_MESSAGES:
        raise forms.ValidationError(f"at most {MAX_MESSAGES} messages")
    if messages[-1]["role"] != "user":
        raise forms.ValidationError("the last message must be the user's (a user: line)")
    return messages


def _model_field(side: str) -> forms.CharField:
    # A text box with the chosen endpoint's known models as its suggestions (a <datalist> the
    # page fills from `endpoint_models`); a model the endpoint does not list is refused below.
    return forms.CharField(
        max_length=200,
        required=False,
        label=f"Model {side.upper()}",
        help_text="Empty: the endpoint's default model",
        widget=forms.TextInput(attrs={"list": f"models-{side}", "autocomplete": "off"}),
    )


class PlaygroundForm(forms.Form):
    endpoint_a = forms.ModelChoiceField(Endpoint.objects.order_by("name"), label="Endpoint A")
    model_a = _model_field("a")
    tier_a = forms.CharField(
        max_length=50,
        required=False,
        label="Tier A",
        help_text="Gateways only (X-Tiergate-Tier); empty: the key's default",
    )
    endpoint_b = forms.ModelChoiceField(Endpoint.objects.order_by("name"), label="Endpoint B")
    model_b = _model_field("b")
    tier_b = forms.CharField(max_length=50, required=False, label="Tier B")
    conversation = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        max_length=MAX_CHARS,
        help_text="A prompt, or a short conversation: lines starting with user: / assistant:",
    )
    max_tokens = forms.IntegerField(min_value=1, max_value=4096, initial=128)
    temperature = forms.FloatField(min_value=0.0, max_value=2.0, initial=0.7)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            # Two different endpoints preselected (the demo's two nodes), so a first comparison
            # needs only a prompt.
            endpoints = list(Endpoint.objects.order_by("name")[:2])
            if endpoints:
                self.initial.setdefault("endpoint_a", endpoints[0].pk)
                self.initial.setdefault("endpoint_b", endpoints[-1].pk)

    def endpoint_models(self) -> dict[str, dict[str, Any]]:
        """For the page: each endpoint's known models and default, by id."""
        return {
            str(e.pk): {"models": list(e.models or []), "default": e.model_to_use()}
            for e in Endpoint.objects.select_related("node").order_by("name")
        }

    def clean_conversation(self) -> list[dict[str, str]]:
        return parse_conversation(self.cleaned_data["conversation"])

    def _tier(self, name: str) -> str:
        tier = self.cleaned_data.get(name, "").strip()
        if tier and not TIER_RE.match(tier):
            raise forms.ValidationError("a tier name: lower-case letters, digits, '_' or '-'")
        return str(tier)

    def clean_tier_a(self) -> str:
        return self._tier("tier_a")

    def clean_tier_b(self) -> str:
        return self._tier("tier_b")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for side in ("a", "b"):
            endpoint = data.get(f"endpoint_{side}")
            if endpoint is None:
                continue
            known = [str(m) for m in endpoint.models or []]
            model = (data.get(f"model_{side}") or "").strip() or endpoint.model_to_use()
            if not model:
                self.add_error(
                    f"model_{side}",
                    "this endpoint knows no model yet: name one, or fetch its models on the "
                    "endpoint's page",
                )
            elif known and model not in known:
                self.add_error(
                    f"model_{side}",
                    f"{endpoint.name} does not serve {model!r}; it serves: {', '.join(known)}",
                )
            data[f"model_{side}"] = model
        return data
