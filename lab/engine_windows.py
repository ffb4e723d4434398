"""What a process beside the engine costs the engine itself, read from the engine's own counter.

    .venv/bin/python -m lab.engine_windows --engine vllm --engine-cores shared \\
        --order dpgbpgbd --rate 32 --duration 20 [--burn 0.06] [--json FILE]
    .venv/bin/python -m lab.engine_windows pool FILE... --kind n [--key computed_tps]

One engine (priority policy) for the whole run, and between its windows the prefix cache is
reset and the engine drained. Each window replays the headline's mixed tiers (Poisson at
`--rate`, past the knee on purpose, so that the engine is never idle) for warm-up + duration,
through the window's path:

    d  straight to the engine (the client sends each tier's priority)
    p  through the bare relay (python -m lab.relay_floor), the client sends priority
    g  through the gateway, the seed's tier config verbatim, keeping off the engine's OpenMP
       cores but leaving its helpers where they are (`--no-fence-engine-helpers`; the agent's
       default moves them, as (h) does)
    f  through the gateway as (g), told not to keep off the cores vLLM's OpenMP threads are
       bound to (`--no-keep-off-engine-cores`): its threads float over every core
    j  through the gateway as (f), its threads pinned onto the cores vLLM's OpenMP threads
       are bound to: the keeper's opposite, leaving the other cores to vLLM's API server and
       engine-core process
    b  straight to the engine, with a burner beside it: a process at the gateway's priority
       that spins `--burn` of one core in 0.3 ms slices and touches no traffic (lab.burner)
    n  through nginx (Debian's), a compiled pass-through, the client sends priority: the
       floor of a hop that is not written in Python
    e  straight to the engine, its helpers fenced for the window: every thread of the engine's
       not bound to one core (API server, engine-core process, the workers' other threads)
       moved off the cores its OpenMP threads hold, and given back after the window
    h  through (g)'s gateway, the engine's helpers fenced as in (e): what the agent's default
       (`--fence-engine-helpers`) does
    v  through a gateway as (g) with `stream_interval_tokens` `--interval-tokens` on the tiers
       but online: vLLM itself sends their streams that many tokens a piece
    o  straight to the engine as (d), the client asking vLLM for (v)'s pieces itself
    l  through (g)'s gateway, its threads in the idle scheduling class for the window
       (SCHED_IDLE, given back after): it runs only where the engine's threads leave a core
       free and its wake-ups preempt none of them
    c  straight to the engine, closed loop at `--cap` requests in flight: a front that costs
       no CPU and keeps the engine's queue at cap - max_num_seqs (the arrivals and so the
       tier mix differ from the open loop's; the computed tokens and steps show by how much)

A window's figure is the engine's generated tokens per second inside the measured part, from
its own `vllm:generation_tokens_total` sampled once a second (telemetry.counter_rate): what
the engine did, whatever reached the client. Beside it, the tokens it computed in its steps
(prefill and generated) and its steps per second, from `vllm:iteration_tokens_total`. The
engine's speed drifts over minutes, so each window that is not (d) is judged against the mean
of the nearest (d) before and after it. Each window also records, per process label
(lab.cpu_by_process.label), what the scheduler did over its warm-up and measured part
together: cores run, cores' worth of time runnable but waiting for a core, and voluntary and
involuntary context switches a second (`sched`); the window's own front (relay, nginx or
gateway) is labelled `front`, apart from the idle fronts of other windows.
`--engine-cores shared` binds vLLM's threads to every core; `auto` leaves vLLM its own default
binding, every core but one it reserves; `own` pins it to core 0 and the rest off it
(tools.vllm_env.LAYOUTS, as lab.headline's). `--client-off-engine-cores` then moves this
process, the load generator, off the cores the engine's threads are bound to, as the agent
keeps off them: on a node the clients are elsewhere, and here they need not land on the
engine's OpenMP core. `--client-on-engine-cores` moves it onto those cores instead, as (j)
does with the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from console.bench.headline import telemetry
from console.bench.headline.arms import drive
from console.bench.headline.options import ENGINE_NICE
from console.bench.headline.procs import GATEWAY_KEY, run_engine
from console.bench.headline.workload import (
    MODEL,
    SEED_TIER_CONFIG,
    TIER_PRIORITY,
    arm_spec,
    engine_flags,
    records_needed,
    write_prompts,
)
from gpu_agent import cores
from lab import engine_fences as fences
from lab.burner import burner
from lab.cpu_by_process import cpu_seconds, sched_by_label, sched_rates
from lab.headline.arms import lower_tier_fields, with_lower_tiers
from lab.headline.procs import run_gateway, run_nginx, run_relay
from lab.window_stats import RATES, direct_a_a, pooled, summary
from tools.tiny_model import size_problem
from tools.vllm_env import LAYOUTS, use_layout

KINDS = "dpgbncfjehlvo"
# Window (s), a gateway pacing the lower tiers' streams (`stream_pace_ms`, removed from the tier
# config), runs no more; its records in lab/data/windows still pool.
POOLED_KINDS = KINDS + "s"
GATEWAYS = "gfjhlv"  # the kinds whose front is one of our gateways
DIRECT = "dbceo"  # the kinds that go straight to the engine: no front of their own


def _pool_main(argv: list[str]) -> int:
    what = "pool one kind's windows over runs' --json records"
    p = argparse.ArgumentParser(prog="python -m lab.engine_windows pool", description=what)
    p.add_argument("records", nargs="+", type=Path)
    p.add_argument("--kind", required=True, choices=list(POOLED_KINDS))
    p.add_argument("--key", default="engine_tps", choices=list(RATES))
    p.add_argument("--reference", default="d", choices=list(POOLED_KINDS), help="judged against")
    args = p.parse_args(argv)
    try:
        runs = [json.loads(path.read_text(encoding="utf-8"))["windows"] for path in args.records]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        p.error(f"not a lab.engine_windows record: {exc}")
    print(json.dumps(pooled(runs, args.kind, args.key, args.reference)))
    return 0


def _drain(engine_url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        gauges = {n: v for n, _, v in telemetry.scrape(engine_url + "/metrics")}
        if not gauges.get("vllm:num_requests_running") and not gauges.get(
            "vllm:num_requests_waiting"
        ):
            return
        time.sleep(1.0)
    raise RuntimeError(f"{engine_url}: the engine did not drain in {timeout_s:.0f} s")


def tool_fences(args: argparse.Namespace) -> bool:
    """Whether this run moves the engine's helpers itself: for the whole run, or for windows
    (e) and (h)."""
    return bool(args.fence_engine_helpers) or "e" in args.order or "h" in args.order


def run(args: argparse.Namespace, log: Any = print) -> list[dict[str, Any]]:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    seconds = (args.duration + args.warmup) * len(args.order)
    prompts = write_prompts(workdir / "prompts.jsonl", records_needed(args.rate, seconds), 7)
    flags = engine_flags("priority", 1.0, args.seed, args.engine)
    vllm = None
    if args.engine == "vllm":
        from lab.headline.__main__ import dev_vllm

        use_layout(args.engine_cores)
        size = None if args.model_size is None else tuple(args.model_size)
        vllm = dev_vllm(args.engine_nice, size)
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(run_engine(MODEL, flags, workdir, "engine", vllm))
        relay = nginx = floating = joined = None
        ours: dict[str, str | None] = {"gateway": None, "interval": None}
        own, bound = os.sched_getaffinity(0), fences.engine_bound(engine)  # before any fencing
        fenced = args.fence_engine_helpers
        if fenced:
            moved = fences.fence_engine_helpers(engine, own, bound)
            log(json.dumps({"fenced_engine_threads": len(moved), "onto": sorted(own - bound)}))
        if "n" in args.order:
            nginx = stack.enter_context(run_nginx(engine, workdir, "nginx"))
        if "p" in args.order:
            relay = stack.enter_context(run_relay(engine, workdir, "relay"))
        by_hand = tool_fences(args)
        for name, config, kinds in (
            ("gateway", SEED_TIER_CONFIG, "ghl"),
            ("interval", with_lower_tiers(SEED_TIER_CONFIG,
                                          stream_interval_tokens=args.interval_tokens), "v"),
        ):  # fmt: skip
            if not set(args.order) & set(kinds):
                continue
            # With the tool fencing in the run, (g) is kept off by hand: its keeper would read
            # the fenced helpers (one core each on two cores) as OpenMP threads. Otherwise its
            # keeper keeps off and leaves the helpers alone, as (g) always has.
            url = stack.enter_context(run_gateway(
                engine, config, workdir, name,
                flags=["--no-keep-off-engine-cores"] if by_hand else ["--no-fence-engine-helpers"],
            ))  # fmt: skip
            if by_hand:
                cores.pin_process(fences.listener(url), cores.keep_off(own, bound))
            ours[name] = url
        if "f" in args.order:
            floating = stack.enter_context(run_gateway(
                engine, SEED_TIER_CONFIG, workdir, "floating", flags=["--no-keep-off-engine-cores"]
            ))  # fmt: skip
        if "j" in args.order:
            joined = stack.enter_context(run_gateway(
                engine, SEED_TIER_CONFIG, workdir, "joined", flags=["--no-keep-off-engine-cores"]
            ))  # fmt: skip
            if bound:
                cores.pin_process(fences.listener(joined), bound)
        client_cpus = None
        if args.client_off_engine_cores or args.client_on_engine_cores:
            client_cpus = fences.fence_client(own, bound, join=args.client_on_engine_cores)
        gateway = ours["gateway"]
        targets = {**dict.fromkeys(DIRECT, engine), "p": relay, "g": gateway, "h": gateway,
                   "l": gateway, "v": ours["interval"], "n": nginx,
                   "f": floating, "j": joined}  # fmt: skip
        for i, kind in enumerate(args.order):
            target = targets[kind]
            assert target is not None  # each kind in the order has its process, started above
            httpx.post(engine + "/reset_prefix_cache", timeout=30)
            spec = arm_spec(
                base_url=target,
                prompts_file=prompts,
                rate=None if kind == "c" else args.rate,
                concurrency=args.cap if kind == "c" else None,
                duration_s=args.duration,
                warmup_s=args.warmup,
                seed=args.seed + i,
                api_key=GATEWAY_KEY if kind in GATEWAYS else None,
                tier_priority=None if kind in GATEWAYS else TIER_PRIORITY,
            )
            if kind == "o":  # the client asks vLLM for (v)'s pieces itself
                spec.tier_stream_interval = lower_tier_fields(args.interval_tokens)
            helpers = fences.fence_engine_helpers(engine, own, bound) if kind in "eh" else {}
            idled = fences.set_policy(fences.listener(target), os.SCHED_IDLE) if kind == "l" else {}
            with burner(args.burn) if kind == "b" else contextlib.nullcontext() as pid:
                cpu0, t0 = (cpu_seconds(pid) or 0.0, time.time()) if pid else (0.0, 0.0)
                trace = workdir / f"window-{i}-trace.json"  # the engine's samples
                named = _named(target if kind not in DIRECT else None)
                sched0, s0 = sched_by_label(named), time.monotonic()
                result, engine_figures, _ = asyncio.run(drive(spec, engine, None, False, trace))
                sched = sched_rates(sched0, sched_by_label(named), time.monotonic() - s0)
                burnt = ((cpu_seconds(pid) or 0.0) - cpu0) / (time.time() - t0) if pid else None
            cores.unfence(helpers)
            fences.restore_policy(idled)
            row = {
                "window": i,
                "kind": kind,
                "engine_tps": engine_figures["generated_in_window_tps"],
                "computed_tps": engine_figures["computed_in_window_tps"],
                "steps_ps": engine_figures["steps_in_window_sps"],
                "engine_running_mean": engine_figures["engine_running"]["mean"],
                "engine_waiting_mean": engine_figures["engine_waiting"]["mean"],
                "completed": (result.summary.get("overall") or {}).get("completed"),
                "burner_cores": burnt,
                "client_cpus": client_cpus,
                "gateway_cpus": _cpus_of(target) if kind in GATEWAYS else None,
                "helpers_fenced": len(helpers) if kind in "eh" else None,
                "threads_idled": len(idled) if kind == "l" else None,
                "sched": sched,
            }
            log(json.dumps(row))
            rows.append(row)
            _drain(engine)
    return rows


def _named(front_url: str | None) -> dict[int, str]:
    """The labels the scheduler's readings give this process (the load generator, whatever
    its command line) and the window's front, the process serving `front_url`."""
    named = {os.getpid(): "loadgen"}
    front = cores.local_listener(front_url) if front_url else None
    if front is not None:
        named[front] = "front"
    return named


def _cpus_of(url: str) -> list[int] | None:
    """The cores the local process serving `url` may run on (its main thread's)."""
    pid = cores.local_listener(url)
    return sorted(os.sched_getaffinity(pid)) if pid is not None else None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.engine_windows", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--engine", choices=("sim", "vllm"), default="vllm")
    p.add_argument("--engine-cores", choices=LAYOUTS, default="shared")
    fence = p.add_mutually_exclusive_group()
    fence.add_argument(
        "--client-off-engine-cores",
        action="store_true",
        help="keep the load generator off the cores the engine's threads are bound to",
    )
    fence.add_argument(
        "--client-on-engine-cores",
        action="store_true",
        help="pin the load generator onto the cores the engine's threads are bound to",
    )
    p.add_argument(
        "--fence-engine-helpers",
        action="store_true",
        help="move the engine's threads not bound to one core off the cores its OpenMP "
        "threads hold, for the whole run",
    )
    p.add_argument("--engine-nice", type=int, default=ENGINE_NICE, help="as lab.headline's")
    p.add_argument(
        "--model-size",
        type=int,
        nargs=2,
        metavar=("HIDDEN", "LAYERS"),
        help="vllm: a random Llama of this size in place of the tiny one (tools/tiny_model.py)",
    )
    p.add_argument("--order", default="dpgbpgbd", help=f"one letter per window, of {KINDS}")
    p.add_argument("--rate", type=float, default=32.0, help="requests per second")
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds a window")
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--burn", type=float, default=0.06, help="(b): the burner's share of a core")
    p.add_argument("--cap", type=int, default=26, help="(c): requests in flight")
    p.add_argument("--interval-tokens", type=int, default=16,
                   help="(v), (o): the lower tiers' stream interval, tokens")  # fmt: skip
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", default="engine-windows")
    p.add_argument("--json", help="write the windows and the summary here")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pool"]:
        return _pool_main(argv[1:])
    args = parser().parse_args(argv)
    if args.model_size is not None:
        problem = (
            "only with --engine vllm" if args.engine != "vllm" else size_problem(*args.model_size)
        )
        if problem:
            parser().error(f"--model-size: {problem}")
    bad = sorted(set(args.order) - set(KINDS))
    odd = not 0 < args.burn < 1 or args.cap < 1
    odd = odd or not 1 <= args.interval_tokens <= 1024
    if bad or not args.order or odd:
        what = (
            f"unknown window kinds {bad}"
            if bad
            else "--order empty, --burn not in (0, 1), --cap < 1 "
            "or --interval-tokens not in [1, 1024]"
        )
        parser().error(f"{what}; kinds: {KINDS}")
    if tool_fences(args) and args.engine == "vllm" and args.engine_cores == "shared":
        parser().error("--engine-cores shared binds vLLM to every core: none to fence helpers to")
    try:
        rows = run(args)
    except RuntimeError as exc:  # an engine or front that did not start, a core not found
        print(f"python -m lab.engine_windows: {exc}", file=sys.stderr)
        return 1
    result = {"command": ["python", "-m", "lab.engine_windows", *argv], "windows": rows,
              "summary": summary(rows), "direct_a_a": direct_a_a(rows)}  # fmt: skip
    print(json.dumps({"summary": result["summary"], "direct_a_a": result["direct_a_a"]}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
