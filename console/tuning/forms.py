"""Create-version forms: a name, a message, and the JSON pasted into a textarea or uploaded.

Validation runs the same schema as the API, and each broken rule is shown beside the field as
"path: rule", so the operator sees which key of the JSON to fix.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile
from django.http import QueryDict

from console.tuning import services
from console.tuning.engine_check import engine_label, has_report
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from console.tuning.vllm_args import ArgsError
from scheduler import ConfigError, config_to_dict, parse_config

MAX_UPLOAD_BYTES = 256 * 1024


class _VersionForm(forms.Form):
    document_field = ""  # "config" or "args": the textarea holding the JSON
    name = forms.SlugField(
        max_length=100,
        help_text="Letters, digits, '-' and '_'. An existing name gets its next version.",
    )
    message = forms.CharField(max_length=500, required=False, help_text="What changed and why.")
    upload = forms.FileField(
        required=False,
        label="…or upload a JSON file",
        help_text="Replaces the text above when given.",
    )

    def _document_text(self) -> str:
        upload: UploadedFile | None = self.cleaned_data.get("upload")
        if upload is None:
            return str(self.cleaned_data.get(self.document_field) or "")
        if upload.size is not None and upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"the file is larger than {MAX_UPLOAD_BYTES // 1024} KiB")
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text") from None

    def _decoded(self) -> Any:
        try:
            text = self._document_text()
        except forms.ValidationError as exc:
            self.add_error("upload", exc)
            return None
        if not text.strip():
            self.add_error(self.document_field, "paste the JSON here or upload a file")
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            self.add_error(
                self.document_field,
                f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            )
            return None

    def _normalised(self, document: Any) -> dict[str, Any]:
        """The document as stored; raises ConfigError or ArgsError listing every broken rule."""
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        data = self._decoded()
        if data is None:
            return cleaned
        self._textarea_value(data)
        try:
            cleaned["document"] = self._normalised(data)
        except (ConfigError, ArgsError) as exc:
            self.add_error(self.document_field, [str(err) for err in exc.errors])
        return cleaned

    def _textarea_value(self, document: Any) -> None:
        # After an upload the textarea shows the file's content, so the errors refer to text
        # the operator can see and fix.
        if self.cleaned_data.get("upload") is not None and self.is_bound:
            data = self.data.copy() if isinstance(self.data, QueryDict) else dict(self.data)
            data[self.document_field] = json.dumps(document, indent=2)
            self.data = data


class TierConfigForm(_VersionForm):
    document_field = "config"
    config = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false"}),
        required=False,
        label="Config (JSON)",
    )
    # The version this one is made from ("New version of this"): its page diffs against it.
    parent = forms.ModelChoiceField(
        TierConfigVersion.objects.all(), required=False, widget=forms.HiddenInput
    )
    field_order = ["name", "message", "config", "upload"]

    def _normalised(self, document: Any) -> dict[str, Any]:
        return config_to_dict(parse_config(document))


class LaunchProfileForm(_VersionForm):
    document_field = "args"
    args = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 20, "spellcheck": "false"}),
        required=False,
        label="vLLM arguments (JSON, snake_case)",
    )
    parent = forms.ModelChoiceField(
        LaunchProfileVersion.objects.all(), required=False, widget=forms.HiddenInput
    )
    field_order = ["name", "message", "args", "upload"]

    def engine_coverage(self) -> dict[str, list[str]]:
        """For the page: the managed nodes whose engine report the profile is checked against
        (with their engine), and those checked with the built-in rules only."""
        nodes = services.engine_nodes()
        return {
            "checked": [
                f"{n.name} ({engine_label(n.engine_report)})" for n in nodes if has_report(n)
            ],
            "unchecked": [n.name for n in nodes if not has_report(n)],
        }

    def _normalised(self, document: Any) -> dict[str, Any]:
        # The same check as every other write path (the API, sweeps, adoptions): the built-in
        # rules, then the parsers of the engines that may run it (services.check_launch_args).
        return services.check_launch_args(document)
