"""Admission (issue 16): the gateway with the seed's tier config verbatim against going direct.

    .venv/bin/python lab/bench_admission.py sweep [--engine fast|sim] [--duration 5]
    .venv/bin/python lab/bench_admission.py overload [--overload-s 60]

sweep: two identical engines, one behind the gateway (`python -m gpu_agent`, the seed's tiers
verbatim: adaptive awaiting limit, work-conserving release), one reached directly; the
open-loop client (lab/open_loop.py) sends the same rate to both, interleaved on one
schedule, at 0.25x .. 2x the engine's capacity. Engines: `fast`, lab/bench_gateway.py's raw
upstream with a 20 ms TTFT and 4 streams at a time (FCFS queue behind them); `sim`, the
simulator with `--max-num-seqs 8`, 64 output tokens. Capacity is measured first (direct,
closed loop). Per step: finished requests through the gateway / direct (throughput ratio;
unfinished ones are those still queued 2 s after the last send) and added TTFT p50 / p99.
Pinning: both engines on core 0, the gateway and this client on core 1.

overload: the simulator (`--max-num-seqs 16`, priority policy, `--time-scale`) behind the
gateway and a second one direct, the tier mix 70/20/10; 10 s at half the capacity,
`--overload-s` at 10x, then 30 s at half again (a client gives up when it has no first token
after `--client-timeout` s, and disconnects); `--queue-depth N` gives every tier a
`max_queue_depth` (the seed has none: a 10x overload's online backlog, FIFO within the tier,
then takes minutes to drain whatever the order between tiers). Reported per second after the
overload: online TTFT p50, gateway against direct, and the time until online TTFT p50 is back
within 2x (+25 ms) of its level before.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.bench_gateway import CLIENT_CORE
from lab.fast_upstream import FIRST_TOKEN
from lab.open_loop import KEY, free_port, one_request, open_loop, pinned_process
from lab.overload_compare import AFTER_S, BEFORE_S, back_after, per_second
from lab.overload_trace import trace
from scheduler import config_to_dict, default_config

ROOT = Path(__file__).resolve().parent.parent
# Both engines on core 0; the gateway shares core 1 with this client, as an agent shares a
# node's CPUs with its clients' traffic while the engine runs elsewhere.
ENGINE_CORE = 0
STEPS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
TIERS = {"online": 0.7, "batch": 0.2, "offline": 0.1}
NODE_TOKEN = "tgn_bench_admission_0123456789abcdef0123456789"  # loopback, one run
_PENDING: set[asyncio.Task[None]] = set()  # overload requests still open at the end
_GATEWAYS: set[str] = set()  # the targets that are the gateway (the rest set priority)


def _engine_argv(kind: str, port: int, seqs: int, time_scale: float = 1.0) -> list[str]:
    if kind == "fast":
        me = str(ROOT / "lab" / "bench_gateway.py")
        return [sys.executable, me, "upstream", "--port", str(port), "--ttft-ms", "20",
                "--slots", str(seqs)]  # fmt: skip
    return [sys.executable, "-m", "gpu_agent.sim", "serve", "bench", "--port", str(port),
            "--max-num-seqs", str(seqs), "--scheduling-policy", "priority",
            "--sim-eos-mean-tokens", "1000000", "--sim-time-scale", f"{time_scale:g}"]  # fmt: skip


@contextlib.contextmanager
def _stack(
    kind: str, seqs: int, tiers: dict[str, Any], time_scale: float = 1.0
) -> Iterator[tuple[str, str, dict[str, int], str]]:
    """Two engines, a gateway in front of the first; yields (gateway, direct, pids, the
    gateway's engine), the pids named "gateway", "engine_gateway" and "engine_direct"."""
    ports = [free_port() for _ in range(3)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    keys = [{"name": "bench", "key": KEY, "tiers": list(TIERS), "default_tier": "online"}]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        (Path(tmp) / "tiers.json").write_text(json.dumps(tiers))
        (Path(tmp) / "keys.json").write_text(json.dumps(keys))
        pids: dict[str, int] = {}
        for name, port, url in zip(("engine_gateway", "engine_direct"), ports, urls, strict=False):
            argv = _engine_argv(kind, port, seqs, time_scale)
            pids[name] = stack.enter_context(pinned_process(argv, ENGINE_CORE, url + "/health")).pid
        gateway = [sys.executable, "-m", "gpu_agent", "--engine-url", urls[0],
                   "--listen", f"127.0.0.1:{ports[2]}", "--log-level", "warning",
                   "--tier-config", f"{tmp}/tiers.json", "--keys", f"{tmp}/keys.json",
                   "--state-dir", f"{tmp}/state", "--node-token", NODE_TOKEN]  # fmt: skip
        proc = stack.enter_context(pinned_process(gateway, CLIENT_CORE, urls[2] + "/health"))
        pids["gateway"] = proc.pid
        time.sleep(1.5)  # the agent learns the model list from its first telemetry tick
        _GATEWAYS.add(urls[2] + "/v1/chat/completions")
        yield urls[2], urls[1], pids, urls[0]


def _body(max_tokens: int, priority: int | None = None) -> bytes:
    doc: dict[str, Any] = {"model": "bench", "messages": [{"role": "user", "content": "hello"}],
                           "stream": True, "max_tokens": max_tokens}  # fmt: skip
    if priority is not None:
        doc["priority"] = priority
    return json.dumps(doc).encode()


async def _capacity(session: Any, url: str, concurrency: int, seconds: float, body: bytes) -> float:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    done = 0
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            _, ok = await one_request(session, url, body, headers)
            done += ok

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / seconds


async def _sweep(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    os.sched_setaffinity(0, {CLIENT_CORE})
    seqs = 4 if args.engine == "fast" else 8
    max_tokens = 16 if args.engine == "fast" else 64
    tiers = config_to_dict(default_config())
    report: dict[str, Any] = {
        "engine": args.engine,
        "seqs": seqs,
        "tier_config": tiers,
        "steps": [],
    }
    with _stack(args.engine, seqs, tiers) as (gateway, direct, _pids, _engine):
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
            gw, dr = gateway + "/v1/chat/completions", direct + "/v1/chat/completions"
            body = _body(max_tokens)
            capacity = await _capacity(session, dr, 4 * seqs, 4.0, body)
            report["capacity_rps"] = capacity
            print(f"{args.engine}: capacity (direct, closed loop) {capacity:.1f} req/s", flush=True)
            await open_loop(session, [gw, dr], capacity / 4, 1.0)  # warm-up
            for factor in args.steps:
                rate = factor * capacity
                r = await open_loop(session, [gw, dr], rate, args.duration, body=body)
                g, d = r[gw], r[dr]
                status_headers = {"Authorization": f"Bearer {NODE_TOKEN}"}
                async with session.get(
                    gateway + "/agent/v1/status", headers=status_headers
                ) as resp:
                    status = await resp.json()
                row = {
                    "factor": factor,
                    "rate_rps": rate,
                    "throughput_ratio": g["ok"] / max(1, d["ok"]),
                    "added_ttft_p50_ms": g["ttft_p50_ms"] - d["ttft_p50_ms"],
                    "added_ttft_p99_ms": g["ttft_p99_ms"] - d["ttft_p99_ms"],
                    "gateway": g,
                    "direct": d,
                    "client": r["_client"],
                    "load_average_1m": os.getloadavg()[0],
                    "awaiting_limit_after": status.get("awaiting_limit"),
                }
                report["steps"].append(row)
                print(
                    f"{factor:>4}x ({rate:6.1f} req/s each): finished gw {g['ok']} / direct "
                    f"{d['ok']} = x{row['throughput_ratio']:.3f}; TTFT p50 gw "
                    f"{g['ttft_p50_ms']:.1f} / direct {d['ttft_p50_ms']:.1f} ms "
                    f"(added {row['added_ttft_p50_ms']:+.2f}), p99 gw {g['ttft_p99_ms']:.1f} / "
                    f"direct {d['ttft_p99_ms']:.1f} (added {row['added_ttft_p99_ms']:+.2f}); "
                    f"client lag p99 {r['_client']['dispatch_lag_p99_ms']:.1f} ms; "
                    f"load {row['load_average_1m']:.1f}; awaiting limit after "
                    f"{row['awaiting_limit_after']}",
                    flush=True,
                )
    return report


async def _patient(
    session: Any,
    url: str,
    body: bytes,
    headers: dict[str, str],
    patience: float | None,
    seen: list[float],
) -> None:
    """One streamed request; its TTFT goes into `seen` as soon as it is known (a stream cut
    off later, or still open when the run ends, keeps it). The client gives up (and
    disconnects, so the engine or the gateway drops the request) when no first token came
    within `patience` s; once its stream runs it reads it to the end, as a chat client does.
    The bound also keeps the direct engine's backlog from holding every stream of the overload
    on this core."""
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(patience) as clock:
            async with session.post(url, data=body, headers=headers) as response:
                if response.status != 200:
                    await response.read()
                    return
                async for chunk in response.content.iter_any():
                    if not seen and FIRST_TOKEN.search(chunk):
                        seen.append(time.perf_counter() - t0)
                        clock.reschedule(None)
    except Exception:
        pass  # gave up, or the stream broke after its first token (counted as served)


async def _phase_load(
    session: Any,
    targets: list[str],
    rate: float,
    window: tuple[float, float],
    t0: float,
    out: list[Any],
    timeout: float | None = None,
    seed: int = 7,
) -> None:
    """Open loop, tier mix TIERS, each target the same schedule (drawn from `seed`); rows
    (target, tier, sent, ttft, start lag: how late this client began sending it). The phase's
    arrivals lie in `window` (s after t0) on the bench's own clock, not on when the previous
    phase's last request went out: so the phases of two runs line up to the same second, and
    no arrival of one phase falls into the next."""
    import random

    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    lengths = {"online": 32, "batch": 64, "offline": 128}
    priority = {"online": 1, "batch": 2, "offline": 3}
    bodies = {t: _body(n) for t, n in lengths.items()}
    # Direct requests set vLLM's priority themselves (engine priority alone: arm b).
    direct_bodies = {t: _body(n, priority[t]) for t, n in lengths.items()}
    names = list(TIERS)
    weights = list(TIERS.values())
    tasks = []

    async def fire(target: str, tier: str, sent: float) -> None:
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
                   "X-Tiergate-Tier": tier}  # fmt: skip
        body = (bodies if target in _GATEWAYS else direct_bodies)[tier]
        lag = loop.time() - t0 - sent
        seen: list[float] = []
        try:
            await _patient(session, target, body, headers, timeout, seen)
        finally:  # one still open when the run ends counts too (served if it had a token)
            out.append((target, tier, sent, seen[0] if seen else None, lag))

    at, end = t0 + window[0], t0 + window[1]
    while True:
        at += rng.expovariate(rate)
        tier = rng.choices(names, weights)[0]
        if at >= end:
            break
        delay = at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        for target in targets:
            tasks.append(asyncio.create_task(fire(target, tier, at - t0)))
    _PENDING.update(tasks)


async def _overload(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    os.sched_setaffinity(0, {CLIENT_CORE})
    tiers = config_to_dict(default_config())
    if args.queue_depth:
        # Without a bound the online backlog of a 10x overload (FIFO within the tier) takes
        # minutes to drain whatever the order between tiers: shed it with 429s instead.
        for queue in tiers["scheduler"]["queues"].values():
            queue["max_queue_depth"] = args.queue_depth
    if args.admission:
        # An experiment beside the seed's defaults (e.g. '{"max_in_flight": 16,
        # "reserved_slots": 4}'): the figures are then not the seed's.
        tiers["scheduler"].setdefault("admission", {}).update(json.loads(args.admission))
    report: dict[str, Any] = {
        "tier_config": tiers, "overload_s": args.overload_s, "seed": args.seed,
    }  # fmt: skip
    with _stack("sim", 16, tiers, args.time_scale) as (gateway, direct, pids, engine):
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
            gw, dr = gateway + "/v1/chat/completions", direct + "/v1/chat/completions"
            # A slower simulated clock needs a longer probe for as many completions.
            probe_s = 4.0 * max(1.0, args.time_scale / 4)
            capacity = args.capacity or await _capacity(session, dr, 64, probe_s, _body(64))
            report["capacity_rps"] = capacity
            how = "given" if args.capacity else "direct, closed loop, 64 tokens"
            print(f"capacity ({how}) {capacity:.1f} req/s", flush=True)
            rows: list[Any] = []
            t0 = asyncio.get_running_loop().time()
            engines = {"gateway": engine, "direct": direct}
            traced: list[dict[str, Any]] = []
            tracer = asyncio.create_task(
                trace(session, t0, gateway, engines, pids, NODE_TOKEN, traced)
            )
            before, hot, after = BEFORE_S, args.overload_s, float(AFTER_S)
            limit = args.client_timeout or None
            # --only: one path per run (the other engine idles); on a 2-core machine the direct
            # engine's 10x backlog otherwise slows the gateway's engine on the shared core.
            paths = {"both": [gw, dr], "gateway": [gw], "direct": [dr]}[args.only]
            phases = ((capacity / 2, 0.0, before), (capacity * 10, before, before + hot),
                      (capacity / 2, before + hot, before + hot + after))  # fmt: skip
            for rate, start, end in phases:
                await _phase_load(session, paths, rate, (start, end), t0, rows, limit, args.seed)
            await asyncio.sleep(5.0)
            tracer.cancel()
            report["trace"] = traced
            # Every request: (target, tier, sent at (s after t0), TTFT or None, start lag).
            report["t0_monotonic"] = t0
            report["requests"] = rows
            for task in _PENDING:  # still open at the end: recorded (fire), served if started
                task.cancel()
            await asyncio.gather(*_PENDING, return_exceptions=True)
    end_hot = before + hot
    for name, url in (("gateway", gw), ("direct", dr)):
        if args.only not in ("both", name):
            continue
        online = [(s, t) for target, tier, s, t, _ in rows if target == url and tier == "online"]
        base = [t for s, t in online if s < before and t is not None]
        base_p50 = statistics.median(base) if base else None
        per_s = per_second({"overload_s": hot, "requests": rows}, url)
        lag_s = []  # this client's own lag in starting the requests of each second
        back_at = None
        for k in range(int(after)):
            lags = [
                lag
                for target, _, s, _, lag in rows
                if target == url and end_hot + k <= s < end_hot + k + 1
            ]
            lag_s.append(round(max(lags) * 1000, 1) if lags else None)
        if base_p50 is not None:
            back_at = back_after(per_s, [base_p50] * len(per_s))
        tiers_done = {
            tier: sum(1 for target, t_, s, t, _ in rows if target == url and t_ == tier
                      and end_hot - hot <= s < end_hot and t is not None)
            for tier in TIERS
        }  # fmt: skip
        report[name] = {
            "target": url,  # the URL of this path's requests in "requests"
            "online_baseline_p50_ms": None if base_p50 is None else base_p50 * 1000,
            "online_p50_ms_per_second_after": [None if p is None else p * 1000 for p in per_s],
            "seconds_until_back": back_at,
            "client_start_lag_max_ms_per_second_after": lag_s,
            "served_during_overload_per_tier": tiers_done,
        }
        print(f"{name}: {report[name]}", flush=True)
    report["load_average_1m"] = os.getloadavg()[0]
    return report


def _factors(text: str) -> tuple[float, ...]:
    try:
        factors = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not factors or any(f <= 0 for f in factors):
        raise argparse.ArgumentTypeError(f"each step must be above 0: {text!r}")
    return factors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    sw = sub.add_parser("sweep")
    sw.add_argument("--engine", choices=("fast", "sim"), default="fast")
    sw.add_argument("--duration", type=float, default=5.0)
    sw.add_argument(
        "--steps",
        type=_factors,
        default=STEPS,
        help="offered load per step, as fractions of the capacity (default 0.25,0.5,0.75,1,1.5,2)",
    )
    ov = sub.add_parser("overload")
    ov.add_argument("--overload-s", type=float, default=60.0)
    ov.add_argument("--time-scale", type=float, default=4.0, help="simulator wall s per model s")
    ov.add_argument("--queue-depth", type=int, default=0, help="max_queue_depth of every tier")
    ov.add_argument("--only", choices=("both", "gateway", "direct"), default="both")
    ov.add_argument("--admission", default="", help="JSON merged into scheduler.admission")
    ov.add_argument(
        "--seed",
        type=int,
        default=7,
        help="the arrivals of every phase (the same in a control run with the same seed)",
    )
    ov.add_argument(
        "--capacity",
        type=float,
        default=0.0,
        help="req/s the phases' rates are drawn from instead of probing (0: probe); a control "
        "run given its overload run's capacity_rps sends exactly the same requests",
    )
    ov.add_argument(
        "--client-timeout",
        type=float,
        default=10.0,
        help="s a client waits for its first token (0: forever)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    # A SIGTERM runs the cleanup too: no engine or gateway is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    report = asyncio.run(_sweep(args) if args.part == "sweep" else _overload(args))
    report["load_average_end"] = os.getloadavg()
    print(f"load average: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
