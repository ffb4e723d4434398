"""What a sweep searches, parsed and checked (pure: no database).

    parse_spec(data) -> SweepSpec            # raises SpecError(field, message)
    apply_values(kind, base_document, values) -> document   # raises SpecError
    check_values(spec, base_document) -> None # every path and value against the base, at creation

A variable's `path` is, for a tier config, the dotted path of scheduler's diff
("scheduler.queues.online.max_waiting_time_ms"); for a launch profile, the snake_case argument
("max_num_seqs"). Fields are named as the API receives them: `variables[0].values[2]`,
`constraints.max_ttft_p99_ms.online`.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bench.sweeps.choices import Objective, SweepKind, SweepMode
from console.tuning.vllm_args import FIELD_NAMES, ArgsError, validate_args
from scheduler import ConfigError, parse_config
from scheduler.config import effective_dict

MAX_VALUES = 12  # per variable
MAX_TRIALS = 24  # besides the base, in any mode
GRID_VARIABLES = (2, 3)
MAX_COORDINATE_VARIABLES = 6
# Launch arguments a sweep may not vary: they name what is served, not how.
FIXED_ARGS = ("model", "served_model_name", "extra_args", "port")


class SpecError(ValueError):
    """A spec (or a value applied to the base) that breaks a rule; `field` names where."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


@dataclass(frozen=True)
class Variable:
    path: str
    values: tuple[Any, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "values": list(self.values)}


@dataclass(frozen=True)
class Constraints:
    min_throughput_rps: float | None = None
    max_error_rate: float | None = None  # 0-1
    max_ttft_p99_ms: Mapping[str, float] = field(default_factory=dict)  # tier -> cap

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_throughput_rps": self.min_throughput_rps,
            "max_error_rate": self.max_error_rate,
            "max_ttft_p99_ms": dict(self.max_ttft_p99_ms),
        }


@dataclass(frozen=True)
class SweepSpec:
    kind: str  # SweepKind
    mode: str  # SweepMode
    variables: tuple[Variable, ...]
    constraints: Constraints = Constraints()
    objective: str = Objective.MIN_ONLINE_TTFT_P99

    def variables_dicts(self) -> list[dict[str, Any]]:
        return [v.to_dict() for v in self.variables]


@dataclass(frozen=True)
class TrialOutcome:
    """What the planner and best_index need of a finished trial (failed: feasible False).
    `objective_value`: lower is better (scoring.objective_value)."""

    values: Mapping[str, Any]
    feasible: bool
    objective_value: float | None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _choice(data: Mapping[str, Any], key: str, choices: Sequence[str], default: str | None) -> str:
    value = data.get(key, default)
    if value is None:
        raise SpecError(key, "is required")
    if value not in choices:
        raise SpecError(key, f"must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def _path_error(kind: str, path: str) -> str | None:
    if kind == SweepKind.TIER_CONFIG:
        parts = path.split(".")
        if len(parts) < 2 or parts[0] != "scheduler" or not all(parts):
            return "must be a dotted path under scheduler, e.g. scheduler.queues.online.priority"
        return None
    if path not in FIELD_NAMES:
        return "is not a launch argument (snake_case, e.g. max_num_seqs)"
    if path in FIXED_ARGS:
        return "cannot be swept"
    return None


def _parse_variable(kind: str, index: int, raw: Any, seen: set[str]) -> Variable:
    where = f"variables[{index}]"
    if not isinstance(raw, Mapping):
        raise SpecError(where, "must be an object with path and values")
    unknown = sorted(set(raw) - {"path", "values"})
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}", "is not a field of a variable")
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        raise SpecError(f"{where}.path", "is required")
    problem = _path_error(kind, path)
    if problem:
        raise SpecError(f"{where}.path", problem)
    if path in seen:
        raise SpecError(f"{where}.path", f"{path} is already swept by another variable")
    seen.add(path)
    values = raw.get("values")
    if not isinstance(values, list) or not values:
        raise SpecError(f"{where}.values", "must be a non-empty list")
    if len(values) > MAX_VALUES:
        raise SpecError(f"{where}.values", f"at most {MAX_VALUES} values")
    for j, value in enumerate(values):
        if not (_is_number(value) or isinstance(value, bool | str)):
            raise SpecError(f"{where}.values[{j}]", "must be a number, a boolean or a string")
        if any(type(value) is type(v) and value == v for v in values[:j]):
            raise SpecError(f"{where}.values[{j}]", f"{value!r} is listed twice")
    return Variable(path, tuple(values))


def _check_count(mode: str, variables: Sequence[Variable]) -> None:
    if mode == SweepMode.ONE and len(variables) != 1:
        raise SpecError("variables", "one variable in this mode (choose grid for several)")
    if mode == SweepMode.GRID:
        low, high = GRID_VARIABLES
        if not low <= len(variables) <= high:
            raise SpecError("variables", f"a grid has {low} to {high} variables")
    if mode == SweepMode.COORDINATE and len(variables) > MAX_COORDINATE_VARIABLES:
        raise SpecError("variables", f"at most {MAX_COORDINATE_VARIABLES} variables")
    trials = (
        math.prod(len(v.values) for v in variables)
        if mode == SweepMode.GRID
        else sum(len(v.values) for v in variables)
    )
    if trials > MAX_TRIALS:
        raise SpecError("variables", f"{trials} trials; at most {MAX_TRIALS} besides the base")


def _optional_number(data: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if not _is_number(value) or not low <= value <= high:
        raise SpecError(f"constraints.{key}", f"must be a number between {low:g} and {high:g}")
    return float(value)


def parse_constraints(raw: Any) -> Constraints:
    if raw is None:
        return Constraints()
    if not isinstance(raw, Mapping):
        raise SpecError("constraints", "must be an object")
    unknown = sorted(set(raw) - {"min_throughput_rps", "max_error_rate", "max_ttft_p99_ms"})
    if unknown:
        raise SpecError(f"constraints.{unknown[0]}", "is not a constraint")
    caps_raw = raw.get("max_ttft_p99_ms") or {}
    if not isinstance(caps_raw, Mapping):
        raise SpecError("constraints.max_ttft_p99_ms", "must be an object {tier: milliseconds}")
    caps: dict[str, float] = {}
    for tier, cap in caps_raw.items():
        if cap is None:
            continue
        if not _is_number(cap) or cap <= 0:
            raise SpecError(f"constraints.max_ttft_p99_ms.{tier}", "must be a positive number")
        caps[str(tier)] = float(cap)
    return Constraints(
        min_throughput_rps=_optional_number(raw, "min_throughput_rps", 0, 1e9),
        max_error_rate=_optional_number(raw, "max_error_rate", 0, 1),
        max_ttft_p99_ms=caps,
    )


def parse_spec(data: Mapping[str, Any]) -> SweepSpec:
    """Check a decoded spec: kind, mode (default one), variables, constraints and objective
    (default lowest online TTFT P99). The first problem raises SpecError naming its field."""
    if not isinstance(data, Mapping):
        raise SpecError("", "must be an object")
    kind = _choice(data, "kind", SweepKind.values, None)
    mode = _choice(data, "mode", SweepMode.values, SweepMode.ONE)
    objective = _choice(data, "objective", Objective.values, Objective.MIN_ONLINE_TTFT_P99)
    raw_variables = data.get("variables")
    if not isinstance(raw_variables, list) or not raw_variables:
        raise SpecError("variables", "must be a non-empty list of {path, values}")
    seen: set[str] = set()
    variables = tuple(_parse_variable(kind, i, v, seen) for i, v in enumerate(raw_variables))
    _check_count(mode, variables)
    return SweepSpec(kind, mode, variables, parse_constraints(data.get("constraints")), objective)


def _set_path(document: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = document
    for depth, key in enumerate(parts[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise SpecError(path, f"{'.'.join(parts[: depth + 1])} is not an object")
        node = child
    node[parts[-1]] = value


def apply_values(
    kind: str,
    base_document: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    default_max_in_flight: int | None = None,
) -> dict[str, Any]:
    """The base document with each path set to its value, validated as the agent will see it
    (tier config: scheduler.parse_config; launch profile: vllm_args.validate_args). A broken
    rule raises SpecError naming the document's field ("scheduler.queues.online.priority")."""
    document = copy.deepcopy(dict(base_document))
    try:
        if kind == SweepKind.TIER_CONFIG:
            for path, value in values.items():
                _set_path(document, path, value)
            parse_config(document, default_max_in_flight=default_max_in_flight)
        else:
            document.update(values)
            validate_args(document)
    except (ConfigError, ArgsError) as exc:
        first = exc.errors[0]
        raise SpecError(first.path, first.message) from None
    return document


def _leaves(document: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(_leaves(value, f"{path}."))
        else:
            out.append(path)
    return out


def unknown_path(kind: str, path: str, base_document: Mapping[str, Any]) -> str | None:
    """Why a tier-config path names no field of the base (every field it could set, defaults
    included), with the fields there are where the path stops matching; None when it names one
    (or the base itself does not parse: its values' check then says why)."""
    if kind != SweepKind.TIER_CONFIG:
        return None  # launch arguments are checked by name in parse_spec
    try:
        leaves = _leaves(effective_dict(parse_config(base_document)))
    except ConfigError:
        return None
    if path in leaves:
        return None
    parts = path.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        stem = ".".join(parts[:depth])
        below = {
            leaf[len(stem) + 1 :].split(".")[0] for leaf in leaves if leaf.startswith(stem + ".")
        }
        if below:
            return (
                f"{path} is not a field of the base version; {stem} has: {', '.join(sorted(below))}"
            )
    return f"{path} is not a field of the base version"


def check_values(
    spec: SweepSpec, base_document: Mapping[str, Any], *, default_max_in_flight: int | None = None
) -> None:
    """Refuse at creation a path that names no field of the base (`variables[i].path`), and a
    value its trial would fail on: each value on top of the base (and, in a grid, every
    combination), naming `variables[i].values[j]`."""

    def apply(values: Mapping[str, Any]) -> None:
        apply_values(spec.kind, base_document, values, default_max_in_flight=default_max_in_flight)

    for i, variable in enumerate(spec.variables):
        problem = unknown_path(spec.kind, variable.path, base_document)
        if problem:
            raise SpecError(f"variables[{i}].path", problem)
    for i, variable in enumerate(spec.variables):
        for j, value in enumerate(variable.values):
            try:
                apply({variable.path: value})
            except SpecError as exc:
                # Standalone, a grid's value may need the others' (checked below).
                if spec.mode != SweepMode.GRID:
                    raise SpecError(f"variables[{i}].values[{j}]", str(exc)) from None
    if spec.mode == SweepMode.GRID:
        for combo in itertools.product(*(v.values for v in spec.variables)):
            values = dict(zip((v.path for v in spec.variables), combo, strict=True))
            try:
                apply(values)
            except SpecError as exc:
                label = ", ".join(f"{p}={v}" for p, v in values.items())
                raise SpecError("variables", f"the combination {label}: {exc}") from None
