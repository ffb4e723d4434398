"""`python -m lab.headline.tail FOLDER...`: where each arm's online TTFT P99 came from.

A round's online P99 is the 4th-7th slowest of a few hundred online requests, so it is set by
whatever happened in the round's worst moment. This reads the raw runs a headline round keeps
in its folder (`arm-X.json`, every request) and says, per arm:
- the P99, and the tail: the measured requests of the tier at or above it;
- when the tail was sent, as episodes (tail requests less than `EPISODE_GAP_S` apart), in
  seconds from the arm's first send: one episode means one bad moment set the P99;
- what the engine held when the tail arrived, by tier, from the client's side: a request runs
  from its first token to its end (`running_at`); beside it the mean over the measured window,
  sampled every 100 ms. More long lower-tier requests running at the tail's arrival than on
  average says the tail waited for a sequence those held;
- the same requests in the reference arm (every arm replays the same requests: index i is the
  same request, sent at the same offset), their P99 there, and the median paired difference:
  whether the reference was spared that moment or only passed it faster.

FOLDER is a round's folder (`--workdir` of `lab.headline`, or one of its `round-N`
folders); a folder with `round-N` folders is read round by round. Pure functions; `main`
is the shell.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadgen.percentiles import percentile
from loadgen.types import RequestSample, RunResult

EPISODE_GAP_S = 1.0
SAMPLE_EVERY_S = 0.1


def measured(samples: Sequence[RequestSample], tier: str) -> list[RequestSample]:
    """The tier's measured requests that have a first token, as the headline's P99 counts."""
    return [s for s in samples if not s.warmup and s.ok and s.tier == tier and s.ttft is not None]


def tail_of(samples: Sequence[RequestSample], tier: str) -> tuple[float, list[RequestSample]]:
    """The tier's P99 TTFT (seconds) and its requests at or above it, slowest first."""
    ours = measured(samples, tier)
    if not ours:
        raise ValueError(f"no measured {tier} request with a first token")
    p99 = percentile([s.ttft for s in ours if s.ttft is not None], 99)
    tail = sorted((s for s in ours if s.ttft is not None and s.ttft >= p99), key=_ttft_desc)
    return p99, tail


def _ttft_desc(sample: RequestSample) -> float:
    return -(sample.ttft or 0.0)


def episodes(times: Sequence[float], gap_s: float = EPISODE_GAP_S) -> list[tuple[float, float]]:
    """`times` grouped into (first, last) spans whose neighbours are under `gap_s` apart."""
    spans: list[tuple[float, float]] = []
    for t in sorted(times):
        if spans and t - spans[-1][1] < gap_s:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans


def running_at(samples: Sequence[RequestSample], t: float) -> dict[str, int]:
    """Requests running at unix time `t` by tier, seen from the client: first token <= t < end."""
    counts: dict[str, int] = {}
    for s in samples:
        if not s.ok or s.ttft is None or s.e2e is None:
            continue
        if s.send_time + s.ttft <= t < s.send_time + s.e2e:
            tier = s.tier or "-"
            counts[tier] = counts.get(tier, 0) + 1
    return counts


def mean_running(
    samples: Sequence[RequestSample], times: Sequence[float], tiers: Sequence[str]
) -> dict[str, float]:
    """Mean of `running_at` over `times`, per tier (0 for a tier never running)."""
    seen = [running_at(samples, t) for t in times]
    return {tier: statistics.fmean(c.get(tier, 0) for c in seen) if seen else 0.0 for tier in tiers}


def arm_tail(
    samples: Sequence[RequestSample],
    window: tuple[float, float],
    tier: str,
    tiers: Sequence[str],
    reference: Sequence[RequestSample] | None = None,
) -> dict[str, Any]:
    """One arm's tail, described (pure): see the module docstring."""
    p99, tail = tail_of(samples, tier)
    start = min(s.send_time for s in samples)
    steps = max(1, int((window[1] - window[0]) / SAMPLE_EVERY_S))
    grid = [window[0] + i * SAMPLE_EVERY_S for i in range(steps)]
    out: dict[str, Any] = {
        "p99_ms": p99 * 1000,
        "tail": len(tail),
        "episodes_s": [
            [round(a - start, 2), round(b - start, 2)]
            for a, b in episodes([s.send_time for s in tail])
        ],
        "running_at_tail": mean_running(samples, [s.send_time for s in tail], tiers),
        "running_mean": mean_running(samples, grid, tiers),
    }
    if reference is not None:
        by_index = {s.index: s for s in reference if s.ok and s.ttft is not None}
        paired = [(s, by_index[s.index]) for s in tail if s.index in by_index]
        if paired:
            out["reference_tail_ms"] = [round((r.ttft or 0.0) * 1000) for _, r in paired]
            out["tail_ms"] = [round((s.ttft or 0.0) * 1000) for s, _ in paired]
            out["reference_p99_ms"] = tail_of(reference, tier)[0] * 1000
            out["paired_diff_ms"] = statistics.median(
                ((s.ttft or 0.0) - (r.ttft or 0.0)) * 1000 for s, r in paired
            )
    return out


def load_run(path: Path) -> tuple[list[RequestSample], tuple[float, float]]:
    """A raw run (`arm-X.json`): its samples and measured window (unix seconds)."""
    result = RunResult.from_json_dict(json.loads(path.read_text(encoding="utf-8")))
    return result.samples, result.window


def round_folders(folder: Path) -> list[Path]:
    """`folder` itself, or its `round-N` folders in order."""
    rounds = sorted(
        (p for p in folder.glob("round-*") if p.is_dir() and p.name[6:].isdigit()),
        key=lambda p: int(p.name[6:]),
    )
    return rounds or [folder]


def describe_round(folder: Path, tier: str, reference: str) -> dict[str, dict[str, Any]]:
    """Every arm of one round's folder: `arm_tail` against the reference arm's requests."""
    runs = {p.stem[4:]: load_run(p) for p in sorted(folder.glob("arm-*.json"))}
    if not runs:
        raise ValueError(f"{folder}: no arm-X.json (a headline round's folder?)")
    tiers = sorted({s.tier or "-" for samples, _ in runs.values() for s in samples})
    ref = runs[reference][0] if reference in runs else None
    return {
        key: arm_tail(samples, window, tier, tiers, None if key == reference else ref)
        for key, (samples, window) in runs.items()
    }


def render(name: str, arms: dict[str, dict[str, Any]], reference: str) -> list[str]:
    lines = [name]
    for key, a in arms.items():
        running = ", ".join(
            f"{t} {a['running_at_tail'][t]:.1f} ({a['running_mean'][t]:.1f})"
            for t in a["running_at_tail"]
        )
        spans = "; ".join(f"{x:g}-{y:g} s" if y > x else f"{x:g} s" for x, y in a["episodes_s"])
        lines.append(
            f"  ({key}) P99 {a['p99_ms']:.0f} ms, {a['tail']} at or above it, sent {spans}; "
            f"running then (mean): {running}"
        )
        if "paired_diff_ms" in a:
            lines.append(
                f"      the same requests in ({reference}): {a['reference_tail_ms']} ms against "
                f"{a['tail_ms']} (its P99 {a['reference_p99_ms']:.0f} ms); median paired "
                f"difference {a['paired_diff_ms']:+.0f} ms"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.headline.tail",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folders", nargs="+", type=Path, help="headline round folders")
    parser.add_argument("--tier", default="online", help="the tier whose P99 (default online)")
    parser.add_argument("--reference", default="b", help="the arm to pair with (default b)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    every: dict[str, Any] = {}
    for folder in args.folders:
        for one in round_folders(folder):
            try:
                arms = describe_round(one, args.tier, args.reference)
            except (OSError, ValueError, KeyError) as exc:
                print(f"{one}: {exc}", file=sys.stderr)
                return 2
            every[str(one)] = arms
            print("\n".join(render(str(one), arms, args.reference)))
    if args.json is not None:
        args.json.write_text(json.dumps(every, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
