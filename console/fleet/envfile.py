"""Endpoints as shell environment snippets, the seeds' convention (seed 000 section 2):

    export TAOTOKEN_BASE_URL=https://taotoken.net/api
    export TAOTOKEN_API_KEY=sk-...
    export TAOTOKEN_MODEL_ONLINE=model-a
    export TAOTOKEN_MODEL_BATCH=model-b

One prefix (TAOTOKEN) is one endpoint: a BASE_URL, an API_KEY and any number of MODEL or
MODEL_* variables. Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_MODEL = re.compile(r"^(?P<prefix>.*?)_?MODEL(?:_(?P<role>[A-Za-z0-9_]+))?$")
# Which model becomes the default, in order of preference.
_DEFAULT_ROLES = ("DEFAULT", "ONLINE", "")


class EnvError(ValueError):
    """A line that cannot be read, naming the line number."""


@dataclass
class EnvEndpoint:
    prefix: str
    base_url: str = ""
    api_key: str = ""
    models: dict[str, str] = field(default_factory=dict)  # role ("" for plain MODEL) -> model ID

    @property
    def name(self) -> str:
        return self.prefix.lower().replace("_", "-") or "imported"

    @property
    def model_ids(self) -> list[str]:
        seen: list[str] = []
        for model in self.models.values():
            if model and model not in seen:
                seen.append(model)
        return seen

    @property
    def default_model(self) -> str:
        for role in _DEFAULT_ROLES:
            if self.models.get(role):
                return self.models[role]
        ids = self.model_ids
        return ids[0] if ids else ""


def _value(raw: str, lineno: int) -> str:
    if not raw:
        return ""
    try:
        parts = shlex.split(raw, comments=True)
    except ValueError as exc:
        raise EnvError(f"line {lineno}: {exc}") from None
    return " ".join(parts)


def parse_env(text: str) -> list[EnvEndpoint]:
    """Endpoints found in the text, in order of first appearance. Lines that are not
    assignments (comments, blank lines, other commands) are skipped; assignments to other
    variables are ignored."""
    found: dict[str, EnvEndpoint] = {}

    def get(prefix: str) -> EnvEndpoint:
        return found.setdefault(prefix, EnvEndpoint(prefix=prefix))

    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        var, value = match.group(1), _value(match.group(2), lineno)
        upper = var.upper()
        if upper.endswith("BASE_URL"):
            get(upper[: -len("BASE_URL")].rstrip("_")).base_url = value
        elif upper.endswith("API_KEY"):
            get(upper[: -len("API_KEY")].rstrip("_")).api_key = value
        else:
            model = _MODEL.match(upper)
            if model is not None and "MODEL" in upper:
                get(model.group("prefix").rstrip("_")).models[model.group("role") or ""] = value
    return [ep for ep in found.values() if ep.base_url]


def env_prefix(name: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "ENDPOINT"


def render_env(
    name: str, base_url: str, masked_key: str, models: list[str], default_model: str
) -> str:
    """The endpoint as export lines; the key is whatever masked form the caller passes."""
    prefix = env_prefix(name)
    lines = [
        f"export {prefix}_BASE_URL={shlex.quote(base_url)}",
        f"export {prefix}_API_KEY={shlex.quote(masked_key)}",
    ]
    if default_model:
        lines.append(f"export {prefix}_MODEL_DEFAULT={shlex.quote(default_model)}")
    others = [m for m in models if m != default_model]
    for i, model in enumerate(others, start=1):
        lines.append(f"export {prefix}_MODEL_{i}={shlex.quote(model)}")
    return "\n".join(lines) + "\n"
