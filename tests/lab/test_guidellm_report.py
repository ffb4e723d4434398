"""lab/bench_guidellm.py's pure parts: the scenario it hands GuideLLM, and how it reads
GuideLLM's JSON report (the fields GuideLLM 0.8 writes: `benchmarks[].metrics` and
`benchmarks[].requests.successful[]`) and pools the segments of each path. GuideLLM itself is
not a dependency of the project; the benchmark runs it from a venv of its own."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from lab.bench_guidellm import scenario, segment_figures, summarize


def report(ttfts: list[float], rps: float, errored: int = 0) -> dict[str, Any]:
    """A report of one benchmark, shaped as GuideLLM writes it (only the fields read)."""
    ordered = sorted(ttfts)
    return {
        "benchmarks": [
            {
                "metrics": {
                    "time_to_first_token_ms": {
                        "successful": {
                            "median": ordered[len(ordered) // 2],
                            "percentiles": {"p99": ordered[-1]},
                        }
                    },
                    "requests_per_second": {"successful": {"mean": rps}},
                    "request_totals": {"successful": len(ttfts), "errored": errored},
                },
                "requests": {"successful": [{"time_to_first_token_ms": t} for t in ttfts]},
            }
        ]
    }


def test_the_scenario_names_the_target_key_rate_and_tokenizer(tmp_path: Path) -> None:
    args = argparse.Namespace(
        rate=4.0, tokenizer=tmp_path, prompt_tokens=128, output_tokens=64, segment_s=20.0
    )
    spec = scenario("http://127.0.0.1:9", "tgk_x", args, tmp_path / "out.json")["spec"]
    assert spec["backend"]["target"] == "http://127.0.0.1:9"
    assert spec["backend"]["api_key"] == "tgk_x"
    assert spec["profile"] == {"kind": "constant", "rate": [4.0]}
    assert spec["tokenizer"]["model"] == str(tmp_path)
    assert spec["constraints"] == [{"kind": "max_duration", "seconds": 20.0}]
    assert spec["outputs"] == [{"kind": "json", "path": str(tmp_path / "out.json")}]
    direct = scenario("http://127.0.0.1:9", None, args, tmp_path / "d.json")["spec"]
    assert "api_key" not in direct["backend"]


def test_segments_are_pooled_per_path_and_compared() -> None:
    segments = [
        {"path": "direct", "figures": segment_figures(report([10.0] * 99 + [30.0], 4.0))},
        {"path": "gateway", "figures": segment_figures(report([11.0] * 99 + [40.0], 3.9, 1))},
        {"path": "direct", "figures": segment_figures(report([10.0] * 100, 4.0))},
        {"path": "gateway", "figures": segment_figures(report([11.0] * 100, 4.1))},
    ]
    s = summarize(segments)
    assert s["direct"]["requests"] == s["gateway"]["requests"] == 200
    assert s["direct"]["ttft_p50_ms"] == pytest.approx(10.0)
    assert s["gateway"]["ttft_p50_ms"] == pytest.approx(11.0)
    assert s["added_ttft_p50_ms"] == pytest.approx(1.0)
    assert s["gateway"]["errored"] == 1 and s["direct"]["errored"] == 0
    assert s["throughput_ratio"] == pytest.approx(4.0 / 4.0)
    assert s["direct"]["ttft_p99_ms"] < s["gateway"]["ttft_p99_ms"]


def test_a_report_of_several_benchmarks_is_refused() -> None:
    two = report([1.0], 1.0)
    two["benchmarks"] *= 2
    with pytest.raises(ValueError):
        segment_figures(two)
