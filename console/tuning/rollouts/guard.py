"""The SLO guard (pure): compare a wave's figures after the change with figures before it,
and say "passed", "failed" or that it could not judge; never "passed" on too few requests.

The figures come from heartbeats (the wave's own traffic) or from a probe (the load generator
run through the wave's gateways, probe.py). Heartbeats carry, per tier and per second, the
requests finished, errors, rejections and the TTFT P50/P99 of that second (docs/protocol.md),
not the raw latencies, so a window's P99 is estimated as the mean of the per-second P99s
weighted by the requests finished in each second. That is exact when the seconds are alike and
leans toward busy seconds otherwise, which is what an SLO cares about. A probe has every
request's TTFT: its P99 is the nearest-rank one (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from loadgen import RequestSample, percentile
from scheduler import TierConfig, default_config

# Too few requests say nothing about a P99 or a rate: below this on either side a check is
# not judged (and the guard says so), so a quiet wave is never "passed" unseen.
MIN_REQUESTS = 5

PASSED, FAILED, UNJUDGED = "passed", "failed", "unjudged"
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

    @property
    def attempts(self) -> int:
        return self.finished + self.rejected

    def describe(self) -> str:
        p99 = "—" if self.ttft_p99_s is None else f"{self.ttft_p99_s * 1000:.0f} ms"
        rate = "—" if self.error_rate is None else f"{self.error_rate * 100:.1f} %"
        return f"{self.finished} finished, TTFT P99 {p99}, error rate {rate}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowStats:
        p99 = data.get("ttft_p99_s")
        return cls(
            int(data.get("finished") or 0),
            int(data.get("errors") or 0),
            int(data.get("rejected") or 0),
            float(p99) if isinstance(p99, int | float) else None,
        )


NO_FIGURES = WindowStats(0, 0, 0, None)


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


def from_samples(samples: Iterable[RequestSample], tier: str) -> WindowStats:
    """A probe's figures: every request counts (a refusal is an error), the TTFT P99 is over
    the tier's successful requests (None below MIN_REQUESTS)."""
    measured = [s for s in samples if not s.warmup]
    ttfts = [s.ttft for s in measured if s.ok and s.tier == tier and s.ttft is not None]
    return WindowStats(
        finished=len(measured),
        errors=sum(1 for s in measured if not s.ok),
        rejected=0,
        ttft_p99_s=percentile(ttfts, 99) if len(ttfts) >= MIN_REQUESTS else None,
    )


def pooled(stats: Iterable[WindowStats]) -> WindowStats:
    """Several nodes' probe figures as one: counts add, the P99 is weighted by requests."""
    items = list(stats)
    weighted = [(s.ttft_p99_s, s.finished) for s in items if s.ttft_p99_s is not None]
    weight = sum(n for _, n in weighted)
    return WindowStats(
        sum(s.finished for s in items),
        sum(s.errors for s in items),
        sum(s.rejected for s in items),
        sum(p * n for p, n in weighted) / weight if weight else None,
    )


@dataclass(frozen=True)
class GuardResult:
    verdict: str  # PASSED, FAILED or UNJUDGED
    message: str
    requests: int = 0  # the requests after the change the verdict rests on

    @property
    def ok(self) -> bool:
        """Nothing found wrong (which is not "passed": see `passed`)."""
        return self.verdict != FAILED

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    @property
    def failed(self) -> bool:
        return self.verdict == FAILED


def evaluate(
    before: WindowStats,
    after: WindowStats,
    *,
    max_ttft_p99_regression_pct: float | None,
    max_error_rate: float | None,
    tier: str = DEFAULT_TIER,
    source: str = "requests",
) -> GuardResult:
    """PASSED when every check on was judged and held, FAILED when one was judged and broke
    its limit, UNJUDGED otherwise (a check with too few requests on a side). `source` names
    what was counted in the messages ("requests", "probe requests")."""
    problems: list[str] = []
    notes: list[str] = []
    if max_ttft_p99_regression_pct is not None:
        if before.ttft_p99_s is None or after.ttft_p99_s is None:
            side = "before" if before.ttft_p99_s is None else "after"
            notes.append(
                f"TTFT check skipped: fewer than {MIN_REQUESTS} {tier} {source} {side} the change"
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
            notes.append(f"error-rate check skipped: no {source} after the change")
        elif after.attempts < MIN_REQUESTS:
            notes.append(
                f"error-rate check skipped: {after.attempts} {source} after the change, "
                f"fewer than {MIN_REQUESTS}"
            )
        elif rate > max_error_rate:
            problems.append(f"error rate {rate * 100:.1f} % (limit {max_error_rate * 100:g} %)")
    summary = f"before: {before.describe()}; after: {after.describe()}"
    count = after.attempts
    if problems:
        return GuardResult(
            FAILED,
            "SLO guard failed: " + "; ".join(problems) + f", guarded by {count} {source} "
            f"({summary})",
            count,
        )
    if notes:
        return GuardResult(
            UNJUDGED, "SLO guard could not judge: " + "; ".join(notes) + f" ({summary})", 0
        )
    return GuardResult(PASSED, f"SLO guard passed, guarded by {count} {source} ({summary})", count)
