"""Which trial comes next (pure). Resumable by construction: the answer depends only on the
spec and the outcomes stored so far, so a restarted worker asks again and goes on.

    next_trial(spec, done) -> {path: value} | None   # {} = the base, always first; None: done
    planned_count(spec) -> int                        # an upper bound, the base included
    best_assignment(spec, done) -> {path: value}      # coordinate: what the descent kept

Paths and values are opaque here (compared by their JSON form), so a caller may name a
coordinate by a label and give values any JSON meaning (the headline search does).

Modes: one (the base, then each value), grid (the base, then the product of the variables'
values in order), coordinate (the base, then each variable in order: each of its values on top
of the best feasible assignment so far, kept when it beats that on the objective, lower being
better; a failed or infeasible trial never becomes the best).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from console.bench.sweeps.choices import SweepMode
from console.bench.sweeps.spec import SweepSpec, TrialOutcome

__all__ = ["TrialOutcome", "best_assignment", "next_trial", "planned_count"]


def _key(values: Mapping[str, Any]) -> str:
    return json.dumps(dict(values), sort_keys=True, default=repr)


def planned_count(spec: SweepSpec) -> int:
    sizes = [len(v.values) for v in spec.variables]
    if spec.mode == SweepMode.GRID:
        return 1 + (_product(sizes) if sizes else 0)
    return 1 + sum(sizes)


def _product(sizes: Sequence[int]) -> int:
    out = 1
    for size in sizes:
        out *= size
    return out


def _fixed_plan(spec: SweepSpec) -> Iterator[dict[str, Any]]:
    yield {}
    if spec.mode == SweepMode.GRID:
        paths = [v.path for v in spec.variables]
        for combo in itertools.product(*(v.values for v in spec.variables)):
            yield dict(zip(paths, combo, strict=True))
    else:
        for variable in spec.variables:
            for value in variable.values:
                yield {variable.path: value}


def _beats(outcome: TrialOutcome, best: TrialOutcome | None) -> bool:
    if not outcome.feasible:
        return False
    if best is None:
        return True
    if outcome.objective_value is None:
        return False
    return best.objective_value is None or outcome.objective_value < best.objective_value


def _descend(
    spec: SweepSpec, done: Sequence[TrialOutcome]
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Replays the descent over the stored outcomes: (the next assignment or None, the best
    assignment so far)."""
    by_key = {_key(o.values): o for o in done}
    best_values: dict[str, Any] = {}
    base = by_key.get(_key({}))
    if base is None:
        return {}, best_values
    best = base if base.feasible else None
    for variable in spec.variables:
        on_top = dict(best_values)
        for value in variable.values:
            candidate = {**on_top, variable.path: value}
            outcome = by_key.get(_key(candidate))
            if outcome is None:
                return candidate, best_values
            if _beats(outcome, best):
                best, best_values = outcome, candidate
    return None, best_values


def next_trial(spec: SweepSpec, done: Sequence[TrialOutcome]) -> dict[str, Any] | None:
    """The next assignment to measure; `done` holds every finished trial, the base among them."""
    if spec.mode == SweepMode.COORDINATE:
        return _descend(spec, done)[0]
    tried = {_key(o.values) for o in done}
    return next((values for values in _fixed_plan(spec) if _key(values) not in tried), None)


def best_assignment(spec: SweepSpec, done: Sequence[TrialOutcome]) -> dict[str, Any]:
    """Coordinate mode: the assignment the descent has kept so far ({}: the base)."""
    return _descend(spec, done)[1]
