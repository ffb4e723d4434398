"""Gateway overhead: the agent's gateway against going direct to the same upstream.

    .venv/bin/python lab/bench_gateway.py [--duration 4] [--rates 50,100,200] [--json FILE]
        [--delta content|reasoning|tool_calls] [--baseline-ref REF] [--ceiling-rates ""]

Processes: a deterministic cheap upstream (a raw asyncio HTTP/1.1 server, lab/fast_upstream.py,
not the simulator: its cost must not blur the gateway's) answering every completion with 16 SSE
content chunks 1 ms apart then [DONE]; the gateway under test (`python -m gpu_agent`,
standalone, one tier released at once) pinned to core 0; two bare pass-through proxies (the same
uvicorn ASGI stack, no keys, no scheduler, no telemetry; one with an aiohttp upstream client,
one with httpx) pinned to core 0 too; the open-loop client (this process, lab/open_loop.py)
and the upstream on core 1.

Parts:
0. with --baseline-ref REF: the gateway of that git ref (checked out in a temporary worktree)
   and this tree's, interleaved on one schedule at each rate, rounds alternating which goes
   first: CPU per request of each and the median ratio (--baseline-only stops there).
1. overhead: at each rate R, R req/s to the gateway and R req/s straight to the upstream,
   interleaved on one fixed-interval schedule; added TTFT = gateway percentile - direct one;
   the gateway's CPU time per request from /proc (utime + stime).
2. proxies: the bare proxies measured the same way at 100 req/s (CPU per request).
3. ceiling: gateway-only rates stepped up until a step fails (an error, an unfinished request
   after the window, or a TTFT p99 that grows from the first half of the window to the
   second); an empty --ceiling-rates skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Run as a script (lab/bench_gateway.py): the packages at the root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.fast_upstream import DELTAS, proxy_app, serve_upstream
from lab.open_loop import KEY, cpu_seconds, free_port, open_loop, pinned_process

ROOT = Path(__file__).resolve().parent.parent
GATEWAY_CORE, CLIENT_CORE = 0, 1
# A step whose client fell this far behind its schedule measured the client, not the gateway.
CLIENT_LAG_LIMIT_MS = 10.0


async def _measure(
    session: Any, targets: list[str], rate: float, duration: float, pid: int | None
) -> dict[str, Any]:
    cpu0 = cpu_seconds(pid) if pid else 0.0
    result = await open_loop(session, targets, rate, duration)
    if pid:
        result["_cpu_s"] = cpu_seconds(pid) - cpu0
    return result


async def _against_baseline(
    session: Any, args: argparse.Namespace, urls: dict[str, str], pids: dict[str, int]
) -> dict[str, Any]:
    """This tree's gateway and the baseline ref's, interleaved on one schedule at each rate,
    in rounds that alternate which goes first: CPU per request of each, and their ratio."""
    names = ["gateway", "gateway_baseline"]
    direct = urls["upstream"] + "/v1/chat/completions"
    rows = []
    for rate in args.rates:
        for round_ in range(args.baseline_rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            targets = [urls[n] + "/v1/chat/completions" for n in order]
            cpu0 = {n: cpu_seconds(pids[n]) for n in names}
            r = await open_loop(session, [*targets, direct], rate, args.duration)
            row: dict[str, Any] = {"rate": rate, "round": round_}
            for n, url in zip(order, targets, strict=True):
                ok = r[url]["ok"]
                row[n] = {
                    "cpu_ms_per_request": (cpu_seconds(pids[n]) - cpu0[n]) * 1000 / max(1, ok),
                    "ttft_p50_ms": r[url]["ttft_p50_ms"],
                    "errors": r[url]["errors"],
                    "unfinished": r[url]["unfinished"],
                }
            row["cpu_ratio"] = (
                row["gateway"]["cpu_ms_per_request"] / row["gateway_baseline"]["cpu_ms_per_request"]
            )
            rows.append(row)
            print(
                f"vs baseline at {rate:g} req/s, round {round_}: CPU/request "
                f"{row['gateway']['cpu_ms_per_request']:.3f} ms (this tree) vs "
                f"{row['gateway_baseline']['cpu_ms_per_request']:.3f} ms (baseline) = "
                f"{row['cpu_ratio']:.3f}x; errors {row['gateway']['errors']} / "
                f"{row['gateway_baseline']['errors']}",
                flush=True,
            )
    ratios = sorted(row["cpu_ratio"] for row in rows)
    return {"rows": rows, "median_cpu_ratio": ratios[len(ratios) // 2]}


async def _bench(
    args: argparse.Namespace, urls: dict[str, str], pids: dict[str, int]
) -> dict[str, Any]:
    import aiohttp

    os.sched_setaffinity(0, {CLIENT_CORE})
    report: dict[str, Any] = {"overhead": [], "proxies": {}, "ceiling": []}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        gw = urls["gateway"] + "/v1/chat/completions"
        direct = urls["upstream"] + "/v1/chat/completions"
        await open_loop(session, [gw, direct], 50, 1.0)  # warm-up: connections, caches
        if "gateway_baseline" in pids:
            report["baseline"] = await _against_baseline(session, args, urls, pids)
            if args.baseline_only:
                return report
        for rate in args.rates:
            r = await _measure(session, [gw, direct], rate, args.duration, pids["gateway"])
            g, d = r[gw], r[direct]
            row = {
                "rate": rate,
                "gateway": g,
                "direct": d,
                "added_ttft_p50_ms": g["ttft_p50_ms"] - d["ttft_p50_ms"],
                "added_ttft_p99_ms": g["ttft_p99_ms"] - d["ttft_p99_ms"],
                "gateway_cpu_ms_per_request": r["_cpu_s"] * 1000 / max(1, g["ok"]),
                "client": r["_client"],
            }
            report["overhead"].append(row)
            print(
                f"rate {rate:>4}: added TTFT p50 {row['added_ttft_p50_ms']:+.2f} ms, "
                f"p99 {row['added_ttft_p99_ms']:+.2f} ms; gateway CPU "
                f"{row['gateway_cpu_ms_per_request']:.2f} ms/request; errors {g['errors']}",
                flush=True,
            )
        # Part 2: the gateway and both bare proxies side by side under the same noise.
        names = ["gateway", "proxy_aiohttp", "proxy_httpx"]
        side = [urls[n] + "/v1/chat/completions" for n in names]
        await open_loop(session, [*side, direct], 50, 0.5)
        cpu0 = {n: cpu_seconds(pids[n]) for n in names}
        r = await open_loop(session, [*side, direct], 100, args.duration)
        for n, url in zip(names, side, strict=True):
            p = r[url]
            report["proxies"][n] = {
                "cpu_ms_per_request": (cpu_seconds(pids[n]) - cpu0[n]) * 1000 / max(1, p["ok"]),
                "added_ttft_p50_ms": p["ttft_p50_ms"] - r[direct]["ttft_p50_ms"],
                "added_ttft_p99_ms": p["ttft_p99_ms"] - r[direct]["ttft_p99_ms"],
                "errors": p["errors"],
            }
            print(f"side by side at 100 req/s, {n}: {report['proxies'][n]}", flush=True)
        # Part 3: gateway only, stepping up until a step fails or the client cannot keep up.
        for rate in args.ceiling_rates:
            r = await _measure(session, [gw], rate, args.ceiling_duration, pids["gateway"])
            g = r[gw]
            busy = r["_cpu_s"] / args.ceiling_duration
            first, second = g["ttft_p99_first_half_ms"], g["ttft_p99_second_half_ms"]
            growing = first is None or second is None or second > 2 * first + 5
            client_limited = r["_client"]["dispatch_lag_p99_ms"] > CLIENT_LAG_LIMIT_MS
            ok = g["errors"] == 0 and g["unfinished"] == 0 and not growing and not client_limited
            row = {
                **g,
                "rate": rate,
                "ok": ok,
                "client_limited": client_limited,
                "gateway_core_busy": busy,
                "client": r["_client"],
            }
            report["ceiling"].append(row)
            print(
                f"ceiling {rate:>4} req/s: {'ok' if ok else 'stop'}; gateway core busy {busy:.0%}; "
                f"TTFT p50 {g['ttft_p50_ms']:.1f} p99 {g['ttft_p99_ms']:.1f} ms (halves "
                f"{first:.1f} / {second:.1f}); errors {g['errors']}, unfinished "
                f"{g['unfinished']}; client lag p99 {r['_client']['dispatch_lag_p99_ms']:.1f} ms"
                f"{' (client-limited)' if client_limited else ''}",
                flush=True,
            )
            if not ok:
                break
    passed = [row["rate"] for row in report["ceiling"] if row["ok"]]
    report["max_sustained_rate"] = max(passed) if passed else None
    return report


@contextlib.contextmanager
def _baseline_tree(ref: str | None) -> Iterator[Path | None]:
    """A temporary git worktree of `ref`, for its gateway; None without a ref."""
    if ref is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as parent:
        tree = Path(parent) / "baseline"
        git = ["git", "-C", str(ROOT)]
        subprocess.run([*git, "worktree", "add", "--detach", str(tree), ref], check=True)
        try:
            yield tree
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role")
    up = sub.add_parser("upstream")
    up.add_argument("--port", type=int, required=True)
    up.add_argument("--ttft-ms", type=float, default=0.0)
    up.add_argument("--slots", type=int, default=0, help="streams at once (0: unlimited)")
    up.add_argument("--delta", choices=sorted(DELTAS), default="content")
    px = sub.add_parser("proxy")
    px.add_argument("--client", choices=("aiohttp", "httpx"), required=True)
    px.add_argument("--upstream", required=True)
    px.add_argument("--port", type=int, required=True)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--rates", default="50,100,200")
    parser.add_argument("--ceiling-rates", default="300,400,500,600,700,800,1000")
    parser.add_argument("--ceiling-duration", type=float, default=3.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--delta",
        choices=sorted(DELTAS),
        default="content",
        help="what the upstream's chunks carry: text, reasoning or tool-call deltas",
    )
    parser.add_argument(
        "--baseline-ref",
        help="also run the gateway of this git ref (a temporary worktree), interleaved with "
        "this tree's at each rate, for a before/after CPU ratio",
    )
    parser.add_argument("--baseline-rounds", type=int, default=4)
    parser.add_argument(
        "--baseline-only", action="store_true", help="with --baseline-ref: only that part"
    )
    args = parser.parse_args()

    if args.role == "upstream":
        import uvloop

        uvloop.run(serve_upstream(args.port, args.ttft_ms, args.slots, args.delta))
        return 0
    if args.role == "proxy":
        import uvicorn

        uvicorn.run(
            proxy_app(args.client, args.upstream),
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            access_log=False,
        )
        return 0

    args.rates = [float(r) for r in args.rates.split(",") if r]
    args.ceiling_rates = [float(r) for r in args.ceiling_rates.split(",") if r]
    names = ("upstream", "gateway", "gateway_baseline", "proxy_aiohttp", "proxy_httpx")
    ports = {name: free_port() for name in names}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    me = [sys.executable, str(Path(__file__).resolve())]
    tiers = {
        "scheduler": {
            "queues": {
                "online": {
                    "max_batch_size": 1,
                    "max_waiting_time_ms": 1,
                    "max_tokens_per_batch": 1_000_000,
                    "priority": 1,
                }
            },
            "admission": {
                "max_in_flight": 4096,
                "max_awaiting_first_token": 4096,
                "pass_priority": False,
            },
        }
    }
    keys = [{"name": "bench", "key": KEY, "tiers": ["online"], "default_tier": "online"}]
    with tempfile.TemporaryDirectory() as tmp, _baseline_tree(args.baseline_ref) as baseline:
        (Path(tmp) / "tiers.json").write_text(json.dumps(tiers))
        (Path(tmp) / "keys.json").write_text(json.dumps(keys))
        gateway = [
            sys.executable,
            "-m",
            "gpu_agent",
            "--engine-url",
            urls["upstream"],
            "--listen",
            f"127.0.0.1:{ports['gateway']}",
            "--log-level",
            "warning",
            "--tier-config",
            f"{tmp}/tiers.json",
            "--keys",
            f"{tmp}/keys.json",
        ]
        with contextlib.ExitStack() as stack:
            stack.enter_context(
                pinned_process(
                    [*me, "upstream", "--port", str(ports["upstream"]), "--delta", args.delta],
                    CLIENT_CORE,
                    urls["upstream"] + "/health",
                )
            )
            pids = {
                "gateway": stack.enter_context(
                    pinned_process(gateway, GATEWAY_CORE, urls["gateway"] + "/health")
                ).pid
            }
            if baseline is not None:
                argv = [*gateway]
                argv[argv.index("--listen") + 1] = f"127.0.0.1:{ports['gateway_baseline']}"
                url = urls["gateway_baseline"] + "/health"
                process = pinned_process(argv, GATEWAY_CORE, url, cwd=baseline)
                pids["gateway_baseline"] = stack.enter_context(process).pid
            for client in ("aiohttp", "httpx"):
                name = f"proxy_{client}"
                argv = [
                    *me,
                    "proxy",
                    "--client",
                    client,
                    "--upstream",
                    urls["upstream"],
                    "--port",
                    str(ports[name]),
                ]
                pids[name] = stack.enter_context(
                    pinned_process(argv, GATEWAY_CORE, urls[name] + "/health")
                ).pid
            report = asyncio.run(_bench(args, urls, pids))
    if "baseline" in report:
        print(
            f"gateway CPU / baseline ({args.baseline_ref}) gateway CPU, interleaved, "
            f"{args.delta} deltas: median {report['baseline']['median_cpu_ratio']:.3f}x"
        )
    if args.baseline_only:
        print(f"load average: {os.getloadavg()}")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        return 0
    side = report["proxies"]
    report["cpu_vs_bare_aiohttp_proxy"] = (
        side["gateway"]["cpu_ms_per_request"] / side["proxy_aiohttp"]["cpu_ms_per_request"]
    )
    report["httpx_vs_aiohttp_proxy_cpu"] = (
        side["proxy_httpx"]["cpu_ms_per_request"] / side["proxy_aiohttp"]["cpu_ms_per_request"]
    )
    if report["ceiling"]:
        busiest = max(report["ceiling"], key=lambda row: row["gateway_core_busy"])
        rate = busiest["rate"] / max(busiest["gateway_core_busy"], 1e-9)
        report["core_capacity_estimate"] = rate
        print(f"gateway core capacity from its busiest step: ~{rate:.0f} req/s")
    print(
        f"gateway CPU / bare aiohttp proxy CPU (side by side): "
        f"{report['cpu_vs_bare_aiohttp_proxy']:.2f}x; httpx proxy / aiohttp proxy: "
        f"{report['httpx_vs_aiohttp_proxy_cpu']:.2f}x"
    )
    print(f"highest sustained gateway rate on one core: {report['max_sustained_rate']} req/s")
    print(f"load average: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
