"""The headline experiment (issue 9): tiered scheduling through the gateway against FCFS.

    python manage.py headline [--duration 60] [--seed 1] [--rate R | --load-factor 1.05]
        [--search-trial 15 | --no-search] [--time-scale 1] [--engine sim | vllm] ...
    python -m lab.headline ...     # a checkout's script on this module: rounds, more arms

One fresh engine per arm (seed 000's launch flags on a simulated 8B model on an H100, or a real
vLLM), the same seeded mixed workload (workload.py) replayed in every arm (arms.py runs the
arms that catalog.py defines):

    (a) straight to the engine, fcfs             (b) straight, priority policy + per-tier priority
    (c) gateway, seed 000's tiers, engine fcfs   (d) gateway, seed 000's tiers, engine priority
    (e) gateway with the best tier config a short coordinate-descent search found (search.py)

The offered load is `load_factor` x the engine's saturation throughput, which a short Poisson
sweep against the FCFS engine finds first (saturation.py), unless `--rate` is given.

With a real vLLM (`Options.vllm`, procs.VllmEngine) each engine takes minutes to start, so the
saturation point comes from the closed-loop probe alone (no Poisson sweep), and the search is
better left out (`--no-search`). lab.headline's `--engine vllm` runs vLLM's CPU build on the
tiny random Llama of tools/vllm_env.py; its outputs are sampled (greedy decoding repeats one
byte-level token whose text is empty, so no delta would carry text and no TTFT could be timed);
a drawn EOS (about 1 in 500 tokens) may end a request early, so output lengths differ slightly
between arms, which the table's output tokens per second show.

Outputs, in the work folder: `headline.json` (every arm, tier, sweep step and search trial) and
`arm-<key>.json` (every request of each arm), which store.py turns into benchmark runs.

Library::

    exp = run_experiment(Options(duration_s=60, seed=1), log=print)  # Experiment(doc, outcomes)
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.bench.headline.arms import ArmOutcome, Setup, run_arm
from console.bench.headline.catalog import Arm, standard_arms
from console.bench.headline.procs import VllmEngine, cpu_set
from console.bench.headline.report import verdict
from console.bench.headline.saturation import find_saturation
from console.bench.headline.search import search_tier_config
from console.bench.headline.workload import (
    HARDWARE,
    SEED_TIER_CONFIG,
    TIER_PROFILES,
    engine_flags,
    records_needed,
    write_prompts,
)

# Prompts for this rate bound are written once; the loadgen would repeat them past it.
MAX_RATE_BOUND = 80.0


@dataclass
class Options:
    duration_s: float = 60.0
    warmup_s: float = 5.0
    seed: int = 1
    time_scale: float = 1.0
    rate: float | None = None  # None: find the saturation point first
    load_factor: float = 1.05
    sweep_step_s: float = 10.0
    search_trial_s: float | None = 15.0  # None: no search, no arm (e)
    arms: str = "abcde"
    vllm: VllmEngine | None = None  # None: the simulator
    workdir: Path | None = None
    # The command line that ran it, as recorded: program (e.g. `manage.py headline`) + options.
    command: list[str] = field(default_factory=list)

    @property
    def engine(self) -> str:
        return "sim" if self.vllm is None else "vllm"


@dataclass
class Experiment:
    doc: dict[str, Any]
    outcomes: list[ArmOutcome]


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1m": os.getloadavg()[0],
        "shared": "other engineers' builds and tests ran at the same time (noisy)",
    }


def hardware(vllm: VllmEngine | None) -> str:
    return HARDWARE if vllm is None else vllm.describe()


def _vllm_record(vllm: VllmEngine | None) -> dict[str, Any] | None:
    if vllm is None:
        return None
    return {
        "command": list(vllm.command),
        "model": vllm.model,
        "engine_cpus": vllm.engine_cpus,
        "nice": vllm.nice,
    }


def _clients_off_the_engine_cores(vllm: VllmEngine | None) -> None:
    """With a real vLLM pinned to some cores, this process (the load generator) and the
    gateways it starts keep to the other cores."""
    if vllm is None:
        return
    rest = os.sched_getaffinity(0) - cpu_set(vllm.engine_cpus)
    if vllm.engine_cpus and rest:
        os.sched_setaffinity(0, rest)


def run_experiment(
    opts: Options, log: Callable[[str], None] = print, catalog: Sequence[Arm] | None = None
) -> Experiment:
    """Run the arms `opts.arms` names, in that order, from `catalog` (default: standard_arms();
    lab/ passes its own) and (e) from the search; see the module docstring."""
    started = time.time()
    _clients_off_the_engine_cores(opts.vllm)
    machine_start = machine()
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="tiergate-headline-"))
    workdir.mkdir(parents=True, exist_ok=True)
    bound = max(opts.rate or 0.0, MAX_RATE_BOUND)
    prompts = write_prompts(
        workdir / "prompts.jsonl",
        records_needed(bound, max(opts.duration_s, opts.sweep_step_s) + opts.warmup_s),
        opts.seed,
    )
    setup = Setup(
        rate=opts.rate or 1.0,
        duration_s=opts.duration_s,
        warmup_s=opts.warmup_s,
        seed=opts.seed,
        time_scale=opts.time_scale,
        prompts_file=prompts,
        workdir=workdir,
        vllm=opts.vllm,
    )
    saturation: dict[str, Any] | None = None
    if opts.rate is None:
        saturation = find_saturation(
            setup, step_s=opts.sweep_step_s, log=log, sweep=opts.engine == "sim"
        )
        setup.rate = round(opts.load_factor * saturation["saturation_rps"], 2)
        log(
            f"saturation throughput {saturation['saturation_rps']:.2f} req/s; arms offered "
            f"{setup.rate:.2f} req/s ({opts.load_factor:g}x)"
        )
    outcomes: list[ArmOutcome] = []
    by_key = {arm.key: arm for arm in (standard_arms() if catalog is None else catalog)}
    for arm in (by_key[key] for key in dict.fromkeys(opts.arms) if key in by_key):  # as given
        log(f"arm ({arm.key}) {arm.title}: {opts.duration_s:g} s at {setup.rate:.2f} req/s")
        outcomes.append(run_arm(arm, setup))
    search: dict[str, Any] | None = None
    if "e" in opts.arms and opts.search_trial_s:
        done = {o.arm.key: o for o in outcomes}
        policy = "priority"
        if "c" in done and "d" in done:
            c_p99 = done["c"].tier_row("online")["ttft_p99_ms"] or float("inf")
            d_p99 = done["d"].tier_row("online")["ttft_p99_ms"] or float("inf")
            policy = "fcfs" if c_p99 < d_p99 else "priority"
        log(f"search: engine {policy}, {opts.search_trial_s:g} s per trial")
        search = search_tier_config(setup, policy=policy, trial_s=opts.search_trial_s, log=log)
        arm_e = Arm(
            "e",
            f"gateway-searched-{policy}",
            f"gateway (searched tiers: {', '.join(search['best_path'][1:]) or 'seed'}), "
            f"engine {policy}",
            policy,
            search["best_config"],
        )
        log(f"arm (e) {arm_e.title}: {opts.duration_s:g} s at {setup.rate:.2f} req/s")
        outcomes.append(run_arm(arm_e, setup))
    for outcome in outcomes:
        # The raw run (every request), so that storing can be redone from the folder alone.
        path = workdir / f"arm-{outcome.arm.key}.json"
        path.write_text(json.dumps(outcome.result.to_json_dict()), encoding="utf-8")
    arms = [o.to_json() for o in outcomes]
    doc = {
        "experiment": "headline: tiered scheduling vs FCFS (issue 9)",
        "command": " ".join(shlex.quote(a) for a in opts.command),
        "started_at": started,
        "finished_at": time.time(),
        "machine": {"start": machine_start, "end": machine()},
        "engine": opts.engine,
        "hardware": hardware(opts.vllm),
        "engine_flags": {
            p: engine_flags(p, opts.time_scale, opts.seed, opts.engine)
            for p in ("fcfs", "priority")
        },
        "time_scale": opts.time_scale,
        "workload": {
            "tiers": TIER_PROFILES,
            "arrival": "poisson",
            "rate_rps": setup.rate,
            "load_factor": opts.load_factor if opts.rate is None else None,
            "duration_s": opts.duration_s,
            "warmup_s": opts.warmup_s,
            "seed": opts.seed,
            "stream": True,
        },
        "seed_tier_config": SEED_TIER_CONFIG,
        "saturation": saturation,
        "search": search,
        "options": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in dataclasses.asdict(opts).items()
            if k != "vllm"
        }
        | {"engine": opts.engine, "vllm": _vllm_record(opts.vllm)},
        "workdir": str(workdir),
        "arms": arms,
        "verdict": verdict({a["key"]: a for a in arms}),
    }
    (workdir / "headline.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return Experiment(doc, outcomes)
