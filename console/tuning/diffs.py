"""Structured diffs between two versions: one row per changed leaf (path, old, new, kind).

Tier configs are compared by scheduler.diff_configs, with defaults filled in, so writing a
default explicitly is not a change. Launch profiles are compared on the arguments as set: an
unset argument means "the engine's default", which is a real difference from any set value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from scheduler import ConfigError, diff_configs, parse_config

ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"


@dataclass(frozen=True)
class DiffRow:
    path: str
    old: Any
    new: Any
    kind: str  # ADDED, REMOVED or CHANGED

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def display_rows(rows: list[DiffRow]) -> list[dict[str, Any]]:
    """Rows for a diff table: values as JSON text, absent ones empty."""

    def text(value: Any) -> str:
        return "" if value is None else json.dumps(value)

    return [{"path": r.path, "kind": r.kind, "old": text(r.old), "new": text(r.new)} for r in rows]


def _kind(old: Any, new: Any) -> str:
    if old is None:
        return ADDED
    if new is None:
        return REMOVED
    return CHANGED


def dict_diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[DiffRow]:
    """Leaf-by-leaf difference of two JSON objects; lists are compared whole."""
    rows: list[DiffRow] = []
    for key in [*old, *(k for k in new if k not in old)]:
        path = f"{prefix}{key}"
        before, after = old.get(key), new.get(key)
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            rows.extend(dict_diff(before, after, prefix=f"{path}."))
        elif before != after or type(before) is not type(after):
            if (
                isinstance(before, int | float)
                and isinstance(after, int | float)
                and not isinstance(before, bool)
                and not isinstance(after, bool)
                and float(before) == float(after)
            ):
                continue  # 10 and 10.0 are the same setting
            rows.append(DiffRow(path, before, after, _kind(before, after)))
    return rows


def tier_config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[DiffRow]:
    try:
        changes = diff_configs(parse_config(old), parse_config(new))
    except ConfigError:
        # A version stored under an older schema that no longer parses: compare it as plain JSON
        # rather than refuse to show anything.
        return dict_diff(old, new)
    return [DiffRow(c.path, c.old, c.new, _kind(c.old, c.new)) for c in changes]


def launch_args_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[DiffRow]:
    return dict_diff(old, new)
