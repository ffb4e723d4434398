"""Typed, strict reads of environment variables for settings.

Every reader names the variable in its error, so a malformed value stops start-up with a
message an operator can act on. Secrets may come from `NAME_FILE` (a path whose content is the
value), the convention of Docker and Kubernetes secrets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


class EnvError(ValueError):
    """A variable is present but malformed (or required and missing)."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    value = env.get(name)
    return value if value not in (None, "") else None


def env_str(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    value = _raw(name, environ)
    return default if value is None else value


def env_bool(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(f"{name}: expected true or false (or 1/0, yes/no, on/off), got {value!r}")


def env_int(
    name: str,
    default: int,
    environ: Mapping[str, str] | None = None,
    *,
    minimum: int | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise EnvError(f"{name}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise EnvError(f"{name}: must be >= {minimum}, got {number}")
    return number


def env_list(name: str, default: list[str], environ: Mapping[str, str] | None = None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise EnvError(f"{name}: empty item in comma-separated list {value!r}")
    return items


def env_secret(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """`NAME`, or the stripped content of the file named by `NAME_FILE`; None when neither."""
    value = _raw(name, environ)
    file_name = _raw(f"{name}_FILE", environ)
    if value is not None and file_name is not None:
        raise EnvError(f"{name} and {name}_FILE are both set; set only one")
    if file_name is not None:
        try:
            content = Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise EnvError(f"{name}_FILE: cannot read {file_name!r}: {exc.strerror}") from None
        if not content:
            raise EnvError(f"{name}_FILE: {file_name!r} is empty")
        return content
    return value


def env_url(
    name: str, default: str, schemes: set[str], environ: Mapping[str, str] | None = None
) -> str:
    value = env_secret(name, environ) or default
    scheme = value.split("://", 1)[0] if "://" in value else ""
    base_scheme = scheme.split("+", 1)[0]
    if base_scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise EnvError(f"{name}: unsupported URL scheme {scheme!r} (expected one of: {allowed})")
    return value
