"""Where the gateway's added TTFT goes, timed by the kernel (a packet capture on loopback).

    .venv/bin/python lab/bench_hop.py [--requests 200] [--gap-ms 15] [--json FILE]

Processes: two identical fast upstreams (lab/bench_gateway.py's raw server, 20 ms to the
first token, 16 chunks) on core 0; the gateway (`python -m gpu_agent`, the seed's tier config
verbatim) in front of the first, and this client, on core 1; tcpdump on loopback for the three
ports, pinned to core 0. Requests go one at a time, alternating gateway and direct, `--gap-ms`
apart (far below saturation). From the capture, per request through the gateway:

- in:  client -> gateway request complete  ..  gateway -> engine request complete;
- out: engine -> gateway first content chunk  ..  gateway -> client first content chunk;
- added = in + out; and the wire TTFT of each path (request complete .. first content),
  gateway against direct side by side.

Needs root (tcpdump). Exchanges are matched by order: one request in flight at a time.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.open_loop import KEY, free_port, one_request, pinned_process
from loadgen import capture
from scheduler import config_to_dict, default_config

ROOT = Path(__file__).resolve().parent.parent
ENGINE_CORE, CLIENT_CORE = 0, 1
GATEWAY_CORE = int(os.environ.get("BENCH_HOP_GATEWAY_CORE", "1"))  # the proxy's too
PROFILE = os.environ.get("BENCH_HOP_PROFILE", "")  # a file: the gateway runs under cProfile


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "p50_ms": statistics.median(ms),
        "p90_ms": _pct(ms, 0.9),
        "mean_ms": statistics.mean(ms),
    }


async def _drive(urls: list[str], n: int, gap_s: float) -> None:
    import aiohttp

    body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hello"}],
                       "stream": True, "max_tokens": 16}).encode()  # fmt: skip
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        for i in range(n + 10):  # the first 10 warm every path up and are not kept
            for url in urls[i % len(urls) :] + urls[: i % len(urls)]:  # rotate who goes first
                _, ok = await one_request(session, url + "/v1/chat/completions", body, headers)
                if not ok:
                    raise RuntimeError(f"{url}: a request failed")
                await asyncio.sleep(gap_s)


def _first_content(segments: list[capture.Segment], port: int, n: int) -> list[tuple[float, float]]:
    found = [(e.request_time, e.content_times[0])
             for e in capture.exchanges(segments, port) if e.content_times][-n:]  # fmt: skip
    if len(found) != n:
        raise RuntimeError(f"capture: {len(found)} of {n} exchanges on port {port}")
    return found


def _hop(front: list[tuple[float, float]], back: list[tuple[float, float]]) -> dict[str, Any]:
    """A pass-through's own time per request, by the wire: in + out."""
    ins = [b[0] - f[0] for f, b in zip(front, back, strict=True)]
    outs = [f[1] - b[1] for f, b in zip(front, back, strict=True)]
    return {
        "in": _summary(ins),
        "out": _summary(outs),
        "added": _summary([i + o for i, o in zip(ins, outs, strict=True)]),
        "wire_ttft": _summary([c - r for r, c in front]),
    }


def run(n: int, gap_s: float) -> dict[str, Any]:
    os.sched_setaffinity(0, {CLIENT_CORE})
    names = ("engine", "engine2", "direct", "gateway", "proxy")
    ports = {name: free_port() for name in names}
    urls = {name: f"http://127.0.0.1:{p}" for name, p in ports.items()}
    keys = [{"name": "bench", "key": KEY, "tiers": ["online", "batch", "offline"],
             "default_tier": "online"}]  # fmt: skip
    me = str(ROOT / "lab" / "bench_gateway.py")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        tmpdir = Path(tmp)
        (tmpdir / "tiers.json").write_text(json.dumps(config_to_dict(default_config())))
        (tmpdir / "keys.json").write_text(json.dumps(keys))
        for name in ("engine", "engine2", "direct"):
            stack.enter_context(pinned_process(
                [sys.executable, me, "upstream", "--port", str(ports[name]), "--ttft-ms", "20",
                 "--slots", "4"], ENGINE_CORE, urls[name] + "/health"))  # fmt: skip
        profile = ["-m", "cProfile", "-o", PROFILE] if PROFILE else []
        gateway_argv = [sys.executable, *profile, "-m", "gpu_agent", "--engine-url",
                        urls["engine"], "--listen", f"127.0.0.1:{ports['gateway']}",
                        "--log-level", "warning", "--tier-config", f"{tmp}/tiers.json",
                        "--keys", f"{tmp}/keys.json", "--state-dir", f"{tmp}/state"]  # fmt: skip
        gateway = stack.enter_context(
            pinned_process(gateway_argv, GATEWAY_CORE, urls["gateway"] + "/health")
        )
        proxy_argv = [sys.executable, me, "proxy", "--client", "aiohttp", "--upstream",
                      urls["engine2"], "--port", str(ports["proxy"])]  # fmt: skip
        stack.enter_context(pinned_process(proxy_argv, GATEWAY_CORE, urls["proxy"] + "/health"))
        time.sleep(1.5)  # the agent learns the model list from its first telemetry tick
        pcap = tmpdir / "hop.pcap"
        with _tcpdump(pcap, " or ".join(f"port {p}" for p in ports.values())):
            asyncio.run(_drive([urls["gateway"], urls["proxy"], urls["direct"]], n, gap_s))
        segments = capture.read_pcap(pcap)
        # uvicorn re-raises the signal it stopped on: SIGINT lets cProfile write.
        gateway.send_signal(signal.SIGINT)
        gateway.wait(timeout=30)
    wire = {name: _first_content(segments, ports[name], n) for name in names}
    gw = _hop(wire["gateway"], wire["engine"])
    px = _hop(wire["proxy"], wire["engine2"])
    return {
        "requests": n,
        "gap_ms": gap_s * 1000,
        "gateway": gw,
        "bare_proxy": px,
        "direct": {"wire_ttft": _summary([c - r for r, c in wire["direct"]])},
        "gateway_over_proxy_added_p50": gw["added"]["p50_ms"] / px["added"]["p50_ms"],
        "load_average": os.getloadavg(),
    }


class _tcpdump:
    """capture.tcpdump for a filter of several ports."""

    def __init__(self, path: Path, port_filter: str) -> None:
        self.path = path
        self.filter = port_filter

    def __enter__(self) -> Path:
        import signal
        import subprocess

        self._signal = signal
        command = [capture.tcpdump_path(), "-i", "lo", "-w", str(self.path), "-U",
                   "--immediate-mode", "-s", "0", "-n", "-B", "32768",
                   "--time-stamp-precision", "nano", "tcp", "and", "(", *self.filter.split(),
                   ")"]  # fmt: skip
        self.proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        os.sched_setaffinity(self.proc.pid, {ENGINE_CORE})
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode(errors="replace")
        if "listening on" not in line:
            raise capture.CaptureError(f"tcpdump did not start: {line}")
        return self.path

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)
        self.proc.send_signal(self._signal.SIGINT)
        self.proc.communicate(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=15.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = run(args.requests, args.gap_ms / 1000)
    rows = [("gateway", report["gateway"]), ("bare aiohttp proxy", report["bare_proxy"])]
    for label, hop in rows:
        for part in ("in", "out", "added", "wire_ttft"):
            s = hop[part]
            print(f"{label:20s} {part:9s} p50 {s['p50_ms']:7.3f}  p90 {s['p90_ms']:7.3f} ms")
    print(f"direct               wire_ttft p50 {report['direct']['wire_ttft']['p50_ms']:7.3f} ms")
    print(f"gateway / bare proxy, added p50: x{report['gateway_over_proxy_added_p50']:.2f}")
    print(f"load average {report['load_average']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
