"""The SLO guard (pure): compare a wave's heartbeat figures after the change with the same
nodes' figures before it.

Heartbeats carry, per tier and per second, the requests finished, errors, rejections and the
TTFT P50/P99 of that second (docs/protocol.md), not the raw latencies, so a window's P99 is
estimated as the mean of the per-second P99s weighted by the requests finished in each second.
That is exact when the seconds are alike and leans toward busy seconds otherwise, which is
what an SLO cares about.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler import TierConfig, default_config

# Too few requests say nothing about a P99: below this the TTFT check is skipped (and said so).
MIN_REQUESTS = 5
# Regressions smaller than this are noise on fast engines (5 ms -> 8 ms is "+60 %").
ABSOLUTE_SLACK_S = 0.010


def default_tier(config: TierConfig | None = None) -> str:
    """The tier the guard watches unless told otherwise: the most urgent tier (smallest
    priority number) of the tier config rolled out, or of the seed's when there is none."""
    return (config or default_config()).tiers_by_urgency()[0]


DEFAULT_TIER = default_tier()  # the seed's most urgent tier


@dataclass(frozen=True)
class WindowStats:
    finished: int
    errors: int
    rejected: int
    ttft_p99_s: float | None

    @property
    def error_rate(self) -> float | None:
        attempts = self.finished + self.rejected
        return None if attempts == 0 else (self.errors + self.rejected) / attempts

    def describe(self) -> str:
        p99 = "—" if self.ttft_p99_s is None else f"{self.ttft_p99_s * 1000:.0f} ms"
        rate = "—" if self.error_rate is None else f"{self.error_rate * 100:.1f} %"
        return f"{self.finished} finished, TTFT P99 {p99}, error rate {rate}"


def summarise(tier_maps: Iterable[Mapping[str, Any]], tier: str) -> WindowStats:
    """Aggregate samples' `tiers` JSON for one tier (errors and rejections count all tiers:
    a change that breaks batch traffic is a regression too)."""
    finished = errors = rejected = 0
    weighted = 0.0
    weight = 0
    for tiers in tier_maps:
        for name, figures in (tiers or {}).items():
            if not isinstance(figures, Mapping):
                continue
            done = int(figures.get("finished") or 0)
            errors += int(figures.get("errors") or 0)
            rejected += int(figures.get("rejected") or 0)
            finished += done
            p99 = figures.get("ttft_p99_s")
            if name == tier and isinstance(p99, int | float) and done > 0:
                weighted += float(p99) * done
                weight += done
    return WindowStats(
        finished, errors, rejected, weighted / weight if weight >= MIN_REQUESTS else None
    )


@dataclass(frozen=True)
class GuardResult:
    ok: bool
    message: str


def evaluate(
    before: WindowStats,
    after: WindowStats,
    *,
    max_ttft_p99_regression_pct: float | None,
    max_error_rate: float | None,
    tier: str = DEFAULT_TIER,
) -> GuardResult:
    problems: list[str] = []
    notes: list[str] = []
    if max_ttft_p99_regression_pct is not None:
        if before.ttft_p99_s is None or after.ttft_p99_s is None:
            side = "before" if before.ttft_p99_s is None else "after"
            notes.append(
                f"TTFT check skipped: fewer than {MIN_REQUESTS} {tier} requests {side} the change"
            )
        else:
            base, now = before.ttft_p99_s, after.ttft_p99_s
            change_pct = (now - base) / base * 100 if base > 0 else 0.0
            if change_pct > max_ttft_p99_regression_pct and now - base > ABSOLUTE_SLACK_S:
                problems.append(
                    f"{tier} TTFT P99 {base * 1000:.0f} ms -> {now * 1000:.0f} ms "
                    f"(+{change_pct:.0f} %, limit {max_ttft_p99_regression_pct:g} %)"
                )
    if max_error_rate is not None:
        rate = after.error_rate
        if rate is None:
            notes.append("error-rate check skipped: no requests after the change")
        elif rate > max_error_rate:
            problems.append(f"error rate {rate * 100:.1f} % (limit {max_error_rate * 100:g} %)")
    summary = f"before: {before.describe()}; after: {after.describe()}"
    if problems:
        return GuardResult(False, "SLO guard failed: " + "; ".join(problems) + f" ({summary})")
    extra = ("; " + "; ".join(notes)) if notes else ""
    return GuardResult(True, f"SLO guard passed ({summary}){extra}")
