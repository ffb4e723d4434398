"""A broken tier config as the console and the command line show it: each problem a
`FieldError` (dotted path, rule), all of them together a `ConfigError`, and `field_message`, the
one translator of pydantic's errors into such rules (scheduler/config.py checks the rules).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        # An empty path is a document-level problem (the file is not JSON at all).
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(ValueError):
    """A tier config that breaks one or more rules; `errors` lists them all."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def _loc_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(root)"


# pydantic's bound errors: the sign shown, and the key of the bound in the error's context.
_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def field_message(err: Mapping[str, Any]) -> str:
    """A pydantic error as a short rule ("must be an integer"), for "path: rule" lines.

    The one translator of pydantic's errors: the console's launch-argument validation uses it
    too, so a bound or a type reads the same on every form, API and command line."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        return f"must be {sign} {ctx[key]}"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind in ("int_type", "int_from_float", "int_parsing"):
        return "must be an integer"
    if kind in ("float_type", "float_parsing"):
        return "must be a number"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "bool_type":
        return "must be true or false"
    if kind == "string_type":
        return "must be a string"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "must be an object"
    if kind in ("tuple_type", "list_type"):
        return "must be a list"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty"
    return str(err["msg"])


def field_errors(
    exc: ValidationError, special: Callable[[Mapping[str, Any]], str | None] | None = None
) -> list[FieldError]:
    """Every error of a pydantic validation as a FieldError (dotted path, `field_message`),
    each once. `special` may word an error of its own (a field-specific range); None from it
    falls back to `field_message`."""
    errors: list[FieldError] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        message = (special(err) if special is not None else None) or field_message(err)
        if loc and loc[-1] in ("int", "float") and err["type"].endswith("_type"):
            # One failure per branch of an int | float union: report it once.
            loc, message = loc[:-1], "must be a number"
        field_error = FieldError(_loc_path(loc), message)
        if field_error not in errors:
            errors.append(field_error)
    return errors
