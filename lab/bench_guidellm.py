"""GuideLLM, a load generator that is not ours, on the gateway against going direct.

    .venv/bin/python lab/bench_guidellm.py --guidellm PATH [--engine sim|vllm] [--rate 4]
        [--segment-s 20] [--pairs 3] [--prompt-tokens 128] [--output-tokens 64] [--json FILE]

Why: every gateway figure so far came from the project's own load generator (loadgen/), and
the simulator and our benchmarks once agreed with each other where outside checks did not.
Here GuideLLM measures the same comparison: its TTFT and request throughput through the
gateway (`python -m gpu_agent`, seed 000's tier config verbatim, the online tier) and straight
to the engine, at one constant rate, in segments that alternate direct, gateway, direct, ...
(`--pairs` of each), so that drift lands on both paths alike.

Processes: one engine (the simulator, or with `--engine vllm` vLLM's CPU build on the tiny
model of tools/vllm_env.py, `make vllm-env`) pinned to core 0; the gateway in front of it and
GuideLLM on core 1. GuideLLM is not a dependency of the project (it brings a torch of its
own): install it in a venv of its own and pass its `guidellm` command with `--guidellm`.
Synthetic prompts of `--prompt-tokens`, `--output-tokens` tokens, made with the tiny model's
tokenizer (tools/vllm_env.py builds it; no hub is reached). Each segment writes GuideLLM's
JSON report; the figures are read from it (`segment_figures`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from console.bench.comparison import percentile
from console.bench.headline.procs import GATEWAY_KEY, run_engine, run_gateway
from console.bench.headline.workload import MODEL, SEED_TIER_CONFIG, engine_flags

ENGINE_CORE = 0
CLIENT_CORE = 1


def scenario(target: str, api_key: str | None, args: argparse.Namespace, out: Path) -> dict:
    """GuideLLM's run configuration for one segment (its `--scenario` file)."""
    backend: dict[str, Any] = {
        "kind": "openai_http",
        "target": target,
        "model": MODEL,
        "request_format": "/v1/chat/completions",
    }
    if api_key:
        backend["api_key"] = api_key
    return {
        "spec": {
            "backend": backend,
            "profile": {"kind": "constant", "rate": [args.rate]},
            "tokenizer": {"kind": "huggingface_auto", "model": str(args.tokenizer)},
            "data": [
                {
                    "kind": "synthetic_text",
                    "prompt_tokens": args.prompt_tokens,
                    "output_tokens": args.output_tokens,
                }
            ],
            "constraints": [{"kind": "max_duration", "seconds": args.segment_s}],
            "outputs": [{"kind": "json", "path": str(out)}],
        }
    }


def segment_figures(report: dict[str, Any]) -> dict[str, Any]:
    """GuideLLM's own TTFT p50 / p99 (ms), request throughput and counts of its one
    benchmark, and every successful request's TTFT (ms) for pooling across segments."""
    (bench,) = report["benchmarks"]
    metrics = bench["metrics"]
    ttft = metrics["time_to_first_token_ms"]["successful"]
    rps = metrics["requests_per_second"]["successful"]
    totals = metrics.get("request_totals") or {}
    return {
        "ttft_p50_ms": ttft["median"],
        "ttft_p99_ms": ttft["percentiles"]["p99"],
        "requests_per_s": rps["mean"],
        "successful": totals.get("successful"),
        "errored": totals.get("errored"),
        "incomplete": totals.get("incomplete"),
        "ttft_ms": [r["time_to_first_token_ms"] for r in bench["requests"]["successful"]],
    }


def run_segment(guidellm: str, config: dict, workdir: Path, name: str) -> dict[str, Any]:
    path = workdir / f"{name}-scenario.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    report = Path(config["spec"]["outputs"][0]["path"])
    log = workdir / f"{name}-guidellm.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("wb") as out:
        done = subprocess.run(
            [guidellm, "run", "--scenario", str(path), "--disable-console-interactive"],
            stdout=out, stderr=subprocess.STDOUT, env=env, timeout=config_timeout(config),
            check=False,
        )  # fmt: skip
    if done.returncode != 0 or not report.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"guidellm {name}: exit {done.returncode}\n{tail}")
    return segment_figures(json.loads(report.read_text()))


def config_timeout(config: dict) -> float:
    return float(config["spec"]["constraints"][0]["seconds"]) * 3 + 120


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """Per path: TTFT p50 / p99 of its segments' requests pooled, and the mean throughput of
    its segments; then gateway against direct."""
    paths: dict[str, dict[str, float]] = {}
    for path in ("direct", "gateway"):
        mine = [s["figures"] for s in segments if s["path"] == path]
        pooled = np.asarray([t for m in mine for t in m["ttft_ms"]], dtype=float)
        paths[path] = {
            "ttft_p50_ms": percentile(pooled, 50),
            "ttft_p99_ms": percentile(pooled, 99),
            "requests_per_s": statistics.fmean(m["requests_per_s"] for m in mine),
            "requests": int(pooled.size),
            "errored": sum(m["errored"] or 0 for m in mine),
        }
    d, g = paths["direct"], paths["gateway"]
    return {
        **paths,
        "added_ttft_p50_ms": g["ttft_p50_ms"] - d["ttft_p50_ms"],
        "added_ttft_p99_ms": g["ttft_p99_ms"] - d["ttft_p99_ms"],
        "throughput_ratio": _ratio(g["requests_per_s"], d["requests_per_s"]),
    }


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value

    return parse


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--guidellm", required=True, help="GuideLLM's `guidellm` command (its venv)")
    p.add_argument("--engine", choices=("sim", "vllm"), default="sim")
    p.add_argument("--rate", type=_positive(float), default=4.0, help="constant req/s")
    p.add_argument("--segment-s", type=_positive(float), default=20.0)
    p.add_argument("--pairs", type=_positive(int), default=3)
    p.add_argument("--prompt-tokens", type=_positive(int), default=128)
    p.add_argument("--output-tokens", type=_positive(int), default=64)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    from tools import vllm_env

    args.tokenizer = vllm_env.ensure_model()
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-guidellm-"))
    vllm = None
    if args.engine == "vllm":
        from lab.headline.__main__ import dev_vllm

        vllm = dev_vllm(0)
    os.sched_setaffinity(0, {ENGINE_CORE})  # the engine inherits core 0
    flags = engine_flags("priority", 1.0, 1, args.engine)
    segments: list[dict[str, Any]] = []
    started = time.time()
    with run_engine(MODEL, flags, workdir, "engine", vllm) as engine_url:
        os.sched_setaffinity(0, {CLIENT_CORE})  # the gateway and GuideLLM: core 1
        with run_gateway(engine_url, SEED_TIER_CONFIG, workdir, "gateway") as gateway_url:
            for i in range(args.pairs):
                for path, target, key in (
                    ("direct", engine_url, None),
                    ("gateway", gateway_url, GATEWAY_KEY),
                ):
                    name = f"{path}-{i + 1}"
                    config = scenario(target, key, args, workdir / f"{name}.json")
                    figures = run_segment(args.guidellm, config, workdir, name)
                    segments.append({"path": path, "pair": i + 1, "figures": figures})
                    shown = {k: v for k, v in figures.items() if k != "ttft_ms"}
                    print(f"{name}: {json.dumps(shown)}", file=sys.stderr)
    result = {
        "bench": "guidellm: gateway (seed 000 tiers, online) against direct",
        "engine": args.engine,
        "rate_rps": args.rate,
        "segment_s": args.segment_s,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "started_at": started,
        "load_average": os.getloadavg(),
        "workdir": str(workdir),
        "segments": segments,
        "summary": summarize(segments),
    }
    s = result["summary"]
    for path in ("direct", "gateway"):
        f = s[path]
        print(
            f"{path:8} TTFT p50 {f['ttft_p50_ms']:8.2f} p99 {f['ttft_p99_ms']:8.2f} ms"
            f"   {f['requests_per_s']:.3f} req/s ({f['requests']} requests, "
            f"{f['errored']} errors)"
        )
    print(
        f"gateway - direct: TTFT p50 {s['added_ttft_p50_ms']:+.2f} ms, p99 "
        f"{s['added_ttft_p99_ms']:+.2f} ms; throughput x{s['throughput_ratio']:.4f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
