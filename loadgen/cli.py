"""`python -m loadgen ...`: run a workload, print a table, write JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loadgen import prefixcache
from loadgen.loops import new_runner
from loadgen.prompts import load_prompts_file
from loadgen.runner import run_workload
from loadgen.spec import (
    TIER_HEADER_DEFAULT,
    SpecError,
    WorkloadSpec,
    parse_stages,
    parse_tier_mix,
    parse_tier_priority,
)
from loadgen.stats import OVERALL
from loadgen.types import Progress, RunResult


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m loadgen",
        description="Streaming load generator for OpenAI-compatible endpoints (vLLM, Tiergate).",
    )
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True)
    p.add_argument(
        "--api-key",
        default=os.environ.get("TIERGATE_LOADGEN_API_KEY"),
        help="bearer key (default: $TIERGATE_LOADGEN_API_KEY)",
    )
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--concurrency", type=int, help="requests kept in flight")
    shape.add_argument("--rate", type=float, help="arrivals per second (open loop)")
    shape.add_argument("--stages", help='concurrency ladder "32:60,128:180" (conc:seconds)')
    arrival = p.add_mutually_exclusive_group()
    arrival.add_argument("--poisson", dest="arrival", action="store_const", const="poisson")
    arrival.add_argument("--constant", dest="arrival", action="store_const", const="constant")
    p.add_argument("--requests", type=int, help="measured requests (after warmup)")
    p.add_argument("--duration", type=float, help="measured seconds (after warmup)")
    p.add_argument("--warmup", type=float, default=0.0, help="seconds excluded from results")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--shared-prefix-tokens", type=int, default=0)
    p.add_argument("--prompts-file", help='JSONL: {"prompt": ...} or {"messages": [...]}')
    p.add_argument("--no-stream", dest="stream", action="store_false")
    p.add_argument("--temperature", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--salt",
        default=None,
        help="text that leads every prompt, so a rerun does not hit the last run's prefix "
        "cache (default: a fresh random one per run, printed and kept in the JSON; '' for none)",
    )
    p.add_argument("--tier-mix", default="", help="online=0.7,batch=0.2,offline=0.1")
    p.add_argument("--tier-header", default=TIER_HEADER_DEFAULT)
    p.add_argument(
        "--tier-priority", default="", help="vLLM priority per tier: online=1,batch=2,offline=3"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="per-request seconds")
    p.add_argument("--slo-ttft-ms", type=float)
    p.add_argument("--slo-tpot-ms", type=float)
    p.add_argument("--keep-itl", action="store_true", help="keep every ITL gap in the JSON")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="split the streams over N client processes (one core each)",
    )
    p.add_argument("--json", dest="json_path", help="write the full result here")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    stages = parse_stages(args.stages) if args.stages else []
    concurrency = args.concurrency
    if concurrency is None and args.rate is None and not stages:
        concurrency = 1
    requests = args.requests
    if requests is None and args.duration is None and not stages:
        requests = 100
    return WorkloadSpec(
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
        endpoint=args.endpoint,
        concurrency=concurrency,
        rate=args.rate,
        arrival=args.arrival or "poisson",
        stages=stages,
        requests=requests,
        duration_s=args.duration,
        warmup_s=args.warmup,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        shared_prefix_tokens=args.shared_prefix_tokens,
        prompts_file=args.prompts_file,
        stream=args.stream,
        temperature=args.temperature,
        seed=args.seed,
        salt=new_salt() if args.salt is None else args.salt,
        tier_mix=parse_tier_mix(args.tier_mix) if args.tier_mix else {},
        tier_header=args.tier_header,
        tier_priority=parse_tier_priority(args.tier_priority),
        timeout_s=args.timeout,
        slo_ttft_ms=args.slo_ttft_ms,
        slo_tpot_ms=args.slo_tpot_ms,
        keep_itl_raw=args.keep_itl,
        processes=args.processes,
    )


UNTRUSTED_MARK = "!"


def new_salt() -> str:
    """A salt of its own for each run (docs/architecture.md#benchmarks: prompts are salted per
    run), so running the same command twice measures the engine twice, not its prefix cache
    the second time. The console's runs get theirs the same way (console/bench/services.py)."""
    return f"run-{secrets.token_hex(4)}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def format_summary(result: RunResult, prefix: dict[str, Any] | None = None) -> str:
    """The table and the lines under it; `prefix` is prefixcache.report's (None: not read)."""
    metrics = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
    header = (
        f"{'tier':<10} {'n':>6} {'err':>5} "
        + " ".join(f"{m[:-2].upper() + ' p50/p90/p99 ms':>24}" for m in metrics)
        + f" {'req/s':>8} {'tok/s':>9}"
    )
    lines = [header, "-" * len(header)]
    # A figure the run does not stand behind is marked "!" and explained below the table.
    untrusted = result.validity.get("untrusted") or {}
    for tier, s in result.summary.items():
        cells = " ".join(
            f"{'/'.join(_ms(s[m][q]) for q in ('p50', 'p90', 'p99')) + UNTRUSTED_MARK:>24}"
            if m in untrusted
            else f"{'/'.join(_ms(s[m][q]) for q in ('p50', 'p90', 'p99')):>24}"
            for m in metrics
        )
        rps, tps = s["request_throughput_rps"], s["output_throughput_tps"]
        lines.append(
            f"{tier:<10} {s['count']:>6} {s['errors']:>5} {cells} "
            f"{'-' if rps is None else f'{rps:.2f}':>8} {'-' if tps is None else f'{tps:.1f}':>9}"
        )
    overall = result.summary[OVERALL]
    lines.append(f"measured window: {overall['window_s']:.2f} s")
    for row in result.stages:
        st = row["summary"][OVERALL]
        rps, tps = st["request_throughput_rps"], st["output_throughput_tps"]
        lines.append(
            f"stage {row['stage']} ({row['concurrency']} streams): {st['count']} requests, "
            f"TTFT p99 {_ms(st['ttft_s']['p99'])} ms, "
            f"{'-' if rps is None else f'{rps:.2f}'} req/s, "
            f"{'-' if tps is None else f'{tps:.1f}'} tok/s"
        )
    if overall["goodput_rps"] is not None:
        lines.append(f"goodput: {overall['goodput_rps']:.2f} req/s meeting the SLO")
    v = result.validity
    cpu = v["client_cpu_ratio"]
    lines.append(
        f"client: cpu {'-' if cpu is None else f'{cpu:.0%}'} of a core, dispatch lag p99 "
        f"{_ms(v['dispatch_lag_p99_s'])} ms, loop lag p99 {_ms(v['loop_lag_p99_s'])} ms, "
        f"usage missing {v['usage_missing']}, token times from "
        + ("the kernel's receive stamps" if v.get("receive_times") == "kernel" else "reads")
    )
    for flag in v["flags"]:
        lines.append(f"WARNING (validity): {flag}")
    lines.extend(_cache_lines(str(result.spec.get("salt") or ""), prefix))
    for metric, reason in untrusted.items():
        lines.append(f"{UNTRUSTED_MARK} {metric[:-2].upper()} is not a wire time: {reason}")
    if result.cancelled:
        lines.append("run cancelled: figures cover the requests completed before the cancel")
    errors = [s.error for s in result.samples if s.error]
    if errors:
        lines.append(f"first error: {errors[0]}")
    return "\n".join(lines)


def _cache_lines(salt: str, prefix: dict[str, Any] | None) -> list[str]:
    """The salt the prompts carried, the engine's prefix hit rate over the run where it could
    be read, and a warning when that rate says the run measured the cache."""
    lines = [
        f"prompt salt: {salt} (fresh each run; --salt '' for none)"
        if salt
        else "prompt salt: none (--salt ''): a rerun sends the same prompts"
    ]
    if prefix is None:
        return lines
    if not prefix.get("readable"):
        lines.append(f"engine prefix cache: not read ({prefix.get('why')})")
        return lines
    rate = prefix.get("hit_rate")
    if rate is None:
        lines.append("engine prefix cache: no prompt tokens queried during the run")
        return lines
    share = prefix.get("expected_share")
    lines.append(
        f"engine prefix cache: {rate:.0%} of {prefix['queries']:.0f} prompt tokens were hits "
        f"during the run (from {prefix['source']})"
    )
    if prefix.get("high"):
        expected = "unknown with a prompts file" if share is None else f"about {share:.0%}"
        cause = (
            "the prompts were not salted (--salt '') and the engine still held an earlier run's"
            if not salt
            else "the prompts repeat within the run, or share more than their shared prefix"
        )
        lines.append(
            f"WARNING (prefix cache): the engine served {rate:.0%} of prompt tokens from its "
            f"prefix cache (the workload shares {expected}): {cause}; TTFT and throughput "
            "measure the cache, not the engine's prefill"
        )
    return lines


def _progress_printer(stream: Any) -> Callable[[Progress], None]:
    def show(p: Progress) -> None:
        p99 = "-" if p.current_p99_ttft_s is None else f"{p.current_p99_ttft_s * 1000:.0f} ms"
        stream.write(
            f"\r{p.percent:5.1f}%  {p.elapsed_s:6.1f}s  done {p.requests_done}  "
            f"errors {p.errors}  TTFT p99 {p99}   "
        )
        stream.flush()

    return show


async def _run(spec: WorkloadSpec, quiet: bool) -> RunResult:
    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, cancel.set)
    progress = None if quiet or not sys.stderr.isatty() else _progress_printer(sys.stderr)
    return await run_workload(spec, on_progress=progress, cancel_event=cancel)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        spec = spec_from_args(args)
        if spec.prompts_file:
            load_prompts_file(spec.prompts_file)  # a bad file is a usage error, not a crash mid-run
    except SpecError as exc:
        parser.error(str(exc))
    out = Path(args.json_path) if args.json_path else None
    if out is not None and not os.access(out.parent, os.W_OK):
        parser.error(f"--json: cannot write into {out.parent}")  # before the run, not after it
    # The engine's prefix-cache counters either side of the run (outside its timing).
    before = prefixcache.read_counters(spec.base_url, spec.api_key)
    with new_runner() as runner:
        result = runner.run(_run(spec, args.quiet))
    prefix = prefixcache.report(
        before,
        prefixcache.read_counters(spec.base_url, spec.api_key),
        prefixcache.expected_share(
            spec.prompt_tokens, spec.shared_prefix_tokens, spec.prompts_file
        ),
    )
    if not args.quiet and sys.stderr.isatty():
        sys.stderr.write("\n")
    print(format_summary(result, prefix))
    if out is not None:
        partial = out.with_name(out.name + ".partial")
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump({**result.to_json_dict(), "prefix_cache": prefix}, handle, indent=1)
        partial.replace(out)  # whole or not at all
    overall = result.summary[OVERALL]
    if overall["count"] and overall["completed"] == 0:
        return 1  # nothing succeeded: scripts and CI should notice
    return 0
