"""Decisions an operator can act on (pure: no Django): B against A, from a declared objective
and guardrails, over run-level figures (docs/benchmarks.md, "The decision").

A figure is one number per run (a tier's TTFT P99, the request throughput, the error rate).
Each figure gets a call from two intervals for its change B - A:

- latency and throughput ("ratio" figures) change by a ratio, so they are compared as
  log-ratios: the change is mean(log B) - mean(log A), read back as a percentage. Rates (error
  and shed shares, 0..1) are compared as differences in points;
- with two or more runs a side the standard error is Welch's over the runs' figures, so it
  holds run-to-run noise; with one run on a side the larger side's spread stands in for both
  (pooled); with one run a side an assumed run-to-run spread (PRIOR_RUN_CV) is added to the
  within-run standard error, and the decision is provisional;
- **better / worse**: the call interval (at 1 - 0.05/k, Bonferroni over the decision's k
  figures, so an A/A comparison errs in at most 5% of decisions) excludes zero, and the change
  is at least MIN_EFFECT (5%; rates: 1 point);
- **no clear change**: the equivalence interval (90%: two one-sided tests at 5%) lies inside
  +-EQUIVALENCE (10%; rates: 2 points). Any change there is too small to act on;
- otherwise **undecided**, and a power calculation says how many runs a side would decide it
  at the noise measured (runs_needed).

A decision (decide) combines the calls: a guardrail worse beyond the noise makes it "worse"
whatever else improved (a TTFT guardrail with an SLO only when B is above the SLO); objectives
that disagree make it "mixed", naming them; an undecided objective, or an undecided guardrail
leaning the bad way by at least MIN_EFFECT, makes it "not enough data", with the runs a side
that would decide it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from console.bench.choices import Verdict

RATIO, RATE = "ratio", "rate"
CONFIDENCE = 0.95
MIN_EFFECT = {RATIO: 0.05, RATE: 0.01}
EQUIVALENCE = {RATIO: 0.10, RATE: 0.02}
# Run-to-run spread assumed where a side has one run (coefficient of variation of a run's
# figure; docs/benchmarks.md): repeats measure it instead.
PRIOR_RUN_CV = 0.10
POWER = 0.80
MAX_RUNS = 30  # the power calculation looks no further (runs a side)
UNDECIDED = "undecided"


@dataclass(frozen=True)
class Figure:
    """One figure of a decision: a value per run on each side (None: the run has none)."""

    key: str  # "online.ttft_p99"
    label: str  # "online TTFT P99"
    kind: str  # RATIO or RATE
    higher_is_better: bool
    a: Sequence[float]
    b: Sequence[float]
    unit: str = ""  # how values are shown: "ms" (values in seconds), "req/s", "tok/s", "%"
    # Standard error of one run's figure relative to it, within the run (a bootstrap): used
    # only where a side has one run, beside the assumed run-to-run spread.
    within_a: float = 0.0
    within_b: float = 0.0
    # Requests behind each side's rate figure: a binomial floor for its standard error.
    requests_a: int = 0
    requests_b: int = 0
    slo: float | None = None  # a cap on B (same unit as the values): a guardrail holds below it


@dataclass(frozen=True)
class Estimate:
    key: str
    label: str
    kind: str
    unit: str
    higher_is_better: bool
    before: float | None  # mean over A's runs
    after: float | None
    change: float | None  # ratio figures: B/A - 1; rates: B - A
    low: float | None  # call interval of the change
    high: float | None
    call: str  # better, worse, no clear change, undecided, not enough data (a side has none)
    runs_a: int
    runs_b: int
    provisional: bool
    runs_needed: int | None = None  # runs a side that would decide it (undecided); None: > MAX
    slo: float | None = None
    above_slo: bool = False

    @property
    def leans_worse(self) -> bool:
        """The change points the bad way by at least the minimum effect."""
        if self.change is None:
            return False
        bad = -self.change if self.higher_is_better else self.change
        return bad >= MIN_EFFECT[self.kind]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": change_text(self)}


@dataclass(frozen=True)
class Decision:
    outcome: str  # a Verdict value
    text: str  # the reason, one sentence
    objectives: list[Estimate]
    guardrails: list[Estimate]
    breaches: list[str] = field(default_factory=list)
    disagree: list[str] = field(default_factory=list)
    more_runs: int | None = None  # runs a side to add to decide (not enough data)
    beyond: bool = False  # not enough data, and more than MAX_RUNS a side would be needed
    provisional: bool = False
    confidence: float = CONFIDENCE

    @property
    def headline(self) -> str:
        """The outcome as the page's first line says it."""
        if self.outcome == Verdict.NOT_ENOUGH_DATA and self.more_runs is not None:
            n = self.more_runs
            return f"not enough data: about {n} more run{_s(n)} a side would decide at this noise"
        if self.outcome == Verdict.NOT_ENOUGH_DATA and self.beyond:
            return (
                f"not enough data: more than {MAX_RUNS} runs a side would be needed at this noise"
            )
        return str(self.outcome)

    @property
    def decided(self) -> bool:
        return self.outcome != Verdict.NOT_ENOUGH_DATA

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "headline": self.headline,
            "text": self.text,
            "objectives": [e.as_dict() for e in self.objectives],
            "guardrails": [e.as_dict() for e in self.guardrails],
            "breaches": self.breaches,
            "disagree": self.disagree,
            "more_runs": self.more_runs,
            "provisional": self.provisional,
            "confidence": self.confidence,
        }


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _scale(values: Sequence[float], kind: str) -> np.ndarray:
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if kind == RATIO:
        arr = np.log(np.maximum(arr, 1e-12))
    return arr


def _binomial_sd(p: float, requests: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / requests) if requests else 0.0


def _noise(fig: Figure, xa: np.ndarray, xb: np.ndarray) -> tuple[float, float, float]:
    """(standard error of the change, degrees of freedom, run-to-run sd) on the analysis
    scale. df is inf where the spread is assumed rather than measured."""
    na, nb = xa.size, xb.size
    if fig.kind == RATE:
        pa, pb = float(xa.mean()), float(xb.mean())
        floor = math.hypot(
            _binomial_sd(pa, fig.requests_a) if fig.requests_a else 0.0,
            _binomial_sd(pb, fig.requests_b) if fig.requests_b else 0.0,
        )
        per_run = max(
            _binomial_sd(pa, fig.requests_a // max(na, 1)),
            _binomial_sd(pb, fig.requests_b // max(nb, 1)),
        )
    else:
        floor, per_run = 0.0, PRIOR_RUN_CV
    if na >= 2 and nb >= 2:
        va, vb = xa.var(ddof=1) / na, xb.var(ddof=1) / nb
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)) if se > 0 else na + nb - 2
        sd = math.sqrt((xa.var(ddof=1) * (na - 1) + xb.var(ddof=1) * (nb - 1)) / (na + nb - 2))
    elif max(na, nb) >= 2:
        larger = xa if na >= 2 else xb
        sd = float(larger.std(ddof=1))
        se, df = sd * math.sqrt(1 / na + 1 / nb), float(larger.size - 1)
    else:  # one run a side: the spread is assumed, plus what each run's own sampling adds
        sd = per_run
        se = math.sqrt(2 * per_run**2 + fig.within_a**2 + fig.within_b**2)
        df = math.inf
    return max(se, floor), df, max(sd, per_run if fig.kind == RATE else 0.0)


def _quantile(p: float, df: float) -> float:
    return float(stats.norm.ppf(p) if math.isinf(df) else stats.t.ppf(p, df))


def runs_needed(sd: float, change: float, kind: str, confidence: float) -> int | None:
    """Runs a side at which a change of this size would be decided with POWER, at run-to-run
    spread `sd` (the analysis scale), taking the change seen as the true one: shown
    better/worse when it is at least the minimum effect (the call interval clears zero), or
    shown inside the equivalence margin when it is under it (the 90% interval clears the
    margin); between the two, whichever comes first. The normal approximation's t version,
    n = 2 (t_a + t_power)^2 sd^2 / target^2 solved with df = 2n - 2; None when more than
    MAX_RUNS would be needed."""
    size = abs(change)
    targets = []
    if size >= MIN_EFFECT[kind]:
        targets.append((size, 1 - (1 - confidence) / 2))
    if size < EQUIVALENCE[kind]:
        targets.append((EQUIVALENCE[kind] - size, CONFIDENCE))
    if sd <= 0:
        return 2
    for n in range(2, MAX_RUNS + 1):
        df = 2 * n - 2
        reach = _quantile(POWER, df) * sd * math.sqrt(2 / n)
        if any((_quantile(level, df) * sd * math.sqrt(2 / n) + reach) <= t for t, level in targets):
            return n
    return None


def _back(kind: str, x: float) -> float:
    """A change on the analysis scale as shown: ratio figures as B/A - 1."""
    return math.expm1(x) if kind == RATIO else x


def estimate(fig: Figure, confidence: float = CONFIDENCE) -> Estimate:
    """The figure's change, its call interval at `confidence`, and its call."""
    xa, xb = _scale(fig.a, fig.kind), _scale(fig.b, fig.kind)
    na, nb = int(xa.size), int(xb.size)
    raw_a = [v for v in fig.a if v is not None and math.isfinite(v)]
    raw_b = [v for v in fig.b if v is not None and math.isfinite(v)]
    before = float(np.mean(raw_a)) if raw_a else None
    after = float(np.mean(raw_b)) if raw_b else None

    def make(**fields: Any) -> Estimate:
        return Estimate(
            key=fig.key,
            label=fig.label,
            kind=fig.kind,
            unit=fig.unit,
            higher_is_better=fig.higher_is_better,
            before=before,
            after=after,
            runs_a=na,
            runs_b=nb,
            provisional=min(na, nb) < 2,
            slo=fig.slo,
            above_slo=bool(fig.slo is not None and after is not None and after > fig.slo),
            **fields,
        )

    if not na or not nb:
        return make(change=None, low=None, high=None, call=Verdict.NOT_ENOUGH_DATA)
    delta = float(xb.mean() - xa.mean())
    se, df, sd = _noise(fig, xa, xb)
    call_half = _quantile(1 - (1 - confidence) / 2, df) * se
    same_half = _quantile(CONFIDENCE, df) * se  # 90% two-sided: two one-sided tests at 5%
    change = _back(fig.kind, delta)
    margin = EQUIVALENCE[fig.kind]
    call: str
    if abs(delta) > call_half and abs(change) >= MIN_EFFECT[fig.kind]:
        call = Verdict.BETTER if (delta > 0) == fig.higher_is_better else Verdict.WORSE
    elif -margin < _back(fig.kind, delta - same_half) and _back(fig.kind, delta + same_half) < (
        margin
    ):
        call = Verdict.NO_CLEAR_CHANGE
    else:
        call = UNDECIDED
    return make(
        change=change,
        low=_back(fig.kind, delta - call_half),
        high=_back(fig.kind, delta + call_half),
        call=call,
        runs_needed=runs_needed(sd, change, fig.kind, confidence) if call == UNDECIDED else None,
    )


def _breached(g: Estimate) -> bool:
    return g.call == Verdict.WORSE and (g.slo is None or g.above_slo)


def _pending(e: Estimate, guardrail: bool) -> bool:
    """Undecided, and able to change the outcome: an objective, or a guardrail leaning the
    bad way by the minimum effect (past its SLO, where it has one)."""
    if e.call != UNDECIDED:
        return False
    return not guardrail or (e.leans_worse and (e.slo is None or e.above_slo))


def _texts(estimates: Sequence[Estimate], call: bool = False) -> str:
    return "; ".join(change_text(e) + (f" ({e.call})" if call else "") for e in estimates)


def decide(
    objectives: Sequence[Figure], guardrails: Sequence[Figure], confidence: float = CONFIDENCE
) -> Decision:
    """The decision on B against A (module docstring): objectives first, guardrails after."""
    level = 1 - (1 - confidence) / max(len(objectives) + len(guardrails), 1)
    objs = [estimate(f, level) for f in objectives]
    guards = [estimate(f, level) for f in guardrails]
    measured = [e for e in (*objs, *guards) if e.runs_a and e.runs_b]

    def make(outcome: str, text: str, **fields: Any) -> Decision:
        return Decision(
            outcome,
            text,
            objs,
            guards,
            provisional=any(e.provisional for e in measured),
            confidence=level,
            **fields,
        )

    if any(e.call == Verdict.NOT_ENOUGH_DATA for e in objs):
        return make(Verdict.NOT_ENOUGH_DATA, "a side has no finished run that measured it")
    breaches = [g for g in guards if _breached(g)]
    if breaches:
        return make(
            Verdict.WORSE,
            "guardrail breached: " + _texts(breaches),
            breaches=[g.label for g in breaches],
        )
    better = [e for e in objs if e.call == Verdict.BETTER]
    worse = [e for e in objs if e.call == Verdict.WORSE]
    if better and worse:
        return make(
            Verdict.MIXED,
            "objectives disagree: " + _texts([*better, *worse], call=True),
            disagree=[e.label for e in (*better, *worse)],
        )
    if worse:
        return make(Verdict.WORSE, _texts(worse))
    pending = [e for e in objs if _pending(e, False)] + [g for g in guards if _pending(g, True)]
    if pending:
        needs = [e.runs_needed for e in pending]
        done = min(min(e.runs_a, e.runs_b) for e in pending)
        known = [n for n in needs if n is not None]
        more = max(max(known) - done, 1) if known and len(known) == len(needs) else None
        lead = f"{_texts(better, call=True)}, but " if better else ""
        return make(
            Verdict.NOT_ENOUGH_DATA,
            f"{lead}undecided at this noise: {_texts(pending)}",
            more_runs=more,
            beyond=more is None,
        )
    if better:
        return make(Verdict.BETTER, _texts(better))
    return make(
        Verdict.NO_CLEAR_CHANGE,
        f"{_texts(objs)}: any change is inside the noise and under "
        f"{EQUIVALENCE[RATIO]:.0%}, and no guardrail breached",
    )


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ms":
        return f"{value * 1000:,.0f} ms" if abs(value) >= 0.1 else f"{value * 1000:.1f} ms"
    if unit == "%":
        return f"{value * 100:.1f}%"
    return f"{value:,.3g} {unit}".strip() if abs(value) < 1000 else f"{value:,.0f} {unit}"


def change_text(e: Estimate) -> str:
    """ "throughput -36% (10.2 -> 6.5 req/s, interval -41% to -31%)"."""
    values = f"{_value(e.before, e.unit)} -> {_value(e.after, e.unit)}"
    if e.change is None:
        return f"{e.label} ({values})"
    if e.kind == RATIO:
        change = f"{e.change * 100:+,.0f}%"
        interval = (
            f", interval {e.low * 100:+,.0f}% to {e.high * 100:+,.0f}%"
            if e.low is not None and e.high is not None
            else ""
        )
    else:
        change = f"{e.change * 100:+.1f} pts"
        interval = (
            f", interval {e.low * 100:+.1f} to {e.high * 100:+.1f} pts"
            if e.low is not None and e.high is not None
            else ""
        )
    slo = f", SLO {_value(e.slo, e.unit)}" if e.slo is not None else ""
    return f"{e.label} {change} ({values}{interval}{slo})"
