"""The experiment's pure parts, and the load generator's per-tier `priority` reaching a real
simulated engine (what arm (b) depends on)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import httpx

from console.bench.headline.report import arm_table, verdict
from console.bench.headline.search import candidate_axes
from console.bench.headline.workload import (
    SEED_TIER_CONFIG,
    TIER_PRIORITY,
    engine_flags,
    prompts_records,
    with_admission,
    with_waits,
)
from gpu_agent.sim.testing import run_sim_process
from loadgen import SpecError, WorkloadSpec, run_workload
from loadgen.cli import build_parser, spec_from_args
from scheduler import parse_config


def test_prompts_follow_the_tier_shares_and_shapes_and_are_reproducible() -> None:
    records = prompts_records(2000, seed=5)
    assert records == prompts_records(2000, seed=5)
    assert records != prompts_records(2000, seed=6)
    shares = Counter(r["tier"] for r in records)
    assert 0.65 < shares["online"] / 2000 < 0.75
    assert 0.16 < shares["batch"] / 2000 < 0.24
    assert 0.07 < shares["offline"] / 2000 < 0.13
    lengths = {r["tier"]: (len(r["prompt"].split()), r["max_tokens"]) for r in records}
    assert lengths == {"online": (128, 64), "batch": (512, 128), "offline": (1024, 256)}


def test_seed_config_and_every_search_candidate_are_valid_tier_configs() -> None:
    parse_config(SEED_TIER_CONFIG)
    for _axis, values in candidate_axes():
        for _label, transform in values:
            parse_config(transform(SEED_TIER_CONFIG))
    reserved = dict(candidate_axes())["reserved_slots"][0][1](SEED_TIER_CONFIG)
    assert reserved["scheduler"]["admission"] == {"max_in_flight": 32, "reserved_slots": 4}
    # The transforms copy: seed 000's config stays verbatim.
    assert "admission" not in SEED_TIER_CONFIG["scheduler"]
    assert SEED_TIER_CONFIG["scheduler"]["queues"]["online"]["max_waiting_time_ms"] == 10
    assert with_admission(
        with_admission(SEED_TIER_CONFIG, max_in_flight=8), max_in_flight=None
    ) == (SEED_TIER_CONFIG)
    assert (
        with_waits(SEED_TIER_CONFIG, {"online": 1})["scheduler"]["queues"]["online"][
            "max_waiting_time_ms"
        ]
        == 1
    )


def test_engine_flags_use_the_real_vllm_policy_flag() -> None:
    flags = engine_flags("priority", 2.0, 7)
    assert flags[flags.index("--scheduling-policy") + 1] == "priority"
    assert flags[flags.index("--max-num-seqs") + 1] == "32"
    assert flags[flags.index("--sim-time-scale") + 1] == "2"
    assert "--scheduler-policy" not in flags and "--disable-log-requests" not in flags


def _arm(key: str, online_p99: float | None, rps: float) -> dict[str, object]:
    row = {
        "requests": 10, "done_in_window_rps": rps, "completed": 10, "errors": 0, "rejected": 0,
        "ttft_p50_ms": 5.0, "ttft_p99_ms": online_p99, "e2e_p99_ms": 9.0,
        "request_throughput_rps": rps, "output_tokens_per_s": 100.0,
        "tokens_in_window_tps": 95.0,
    }  # fmt: skip
    engine = {
        "kv_cache_usage": {"mean": 0.1, "max": 0.2}, "engine_running": {"mean": 3.0},
        "engine_waiting": {"mean": 0.5, "max": 2.0}, "preemptions": 0,
        "step_fidelity": {"measured_over_modelled": 1.0},
    }  # fmt: skip
    tiers = {t: dict(row) for t in ("online", "batch", "offline", "overall")}
    return {"key": key, "name": f"arm-{key}", "tiers": tiers, "engine": engine,
            "client_validity": {"flags": []}}  # fmt: skip


def test_verdict_applies_both_targets() -> None:
    arms = {
        "a": _arm("a", 900.0, 20.0),
        "b": _arm("b", 300.0, 19.0),  # exactly a third, 0.95x throughput: meets
        "c": _arm("c", 200.0, 18.0),  # fast but lost throughput: misses
        "d": _arm("d", 400.0, 21.0),  # kept throughput, not fast enough: misses
    }
    result = verdict(arms)
    assert result["b"]["meets_target"] is True
    assert result["c"]["meets_target"] is False
    assert result["d"]["meets_target"] is False
    assert abs(result["d"]["online_ttft_p99_vs_a"] - 400 / 900) < 1e-9
    table = arm_table(list(arms.values()))
    assert "| (a) arm-a | online | 5 | 900 | 9 | 20.00 | 20.00 | 100 | 95 | 0 |" in table
    del arms["a"]["tiers"]["online"]["tokens_in_window_tps"]  # a document from before it
    older = arm_table([arms["a"]])
    assert "| (a) arm-a | online | 5 | 900 | 9 | 20.00 | 20.00 | 100 | - | 0 |" in older
    assert table.count("\n| (") == 4 * 4 + 4  # 4 tier rows + 1 engine row per arm


def test_loadgen_sends_priority_per_tier_to_the_engine(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    lines = [
        {"prompt": "hi there", "max_tokens": 2, "tier": t} for t in ("online", "batch", "offline")
    ]
    prompts.write_text("".join(json.dumps(x) + "\n" for x in lines * 3), encoding="utf-8")
    with run_sim_process(extra_args=["--scheduling-policy", "priority"]) as url:
        spec = WorkloadSpec(
            base_url=url, model="demo", concurrency=3, requests=9, prompts_file=str(prompts),
            tier_priority=TIER_PRIORITY,
        )  # fmt: skip
        result = asyncio.run(run_workload(spec))
        assert result.summary["overall"]["errors"] == 0
        records = httpx.get(url + "/sim/v1/requests", params={"since": 0}).json()["data"]
    by_id = {r["id"]: r["priority"] for r in records}
    seen = {(s.tier, by_id[s.response_id]) for s in result.samples}
    assert seen == {("online", 1), ("batch", 2), ("offline", 3)}


def test_loadgen_tier_priority_option_and_validation() -> None:
    args = build_parser().parse_args(
        ["--base-url", "http://x/v1", "--model", "m", "--tier-priority", "online=1,batch=5"]
    )
    assert spec_from_args(args).tier_priority == {"online": 1, "batch": 5}
    try:
        WorkloadSpec(base_url="http://x", model="m", requests=1, tier_priority={"online": 1.5})  # type: ignore[dict-item]
    except SpecError as exc:
        assert str(exc).startswith("tier_priority.online")
    else:
        raise AssertionError("a float priority was accepted")


def test_the_samplers_read_only_their_gauges_from_a_long_exposition() -> None:
    """`families` drops the lines it was not asked for before the library parses (a real
    vLLM's /metrics is ~600 lines); what it was asked for comes out whole."""
    from console.bench.headline.telemetry import VLLM_GAUGES, families

    text = (
        "# HELP vllm:num_requests_waiting_by_reason look-alike {x}\n"
        "# TYPE vllm:num_requests_waiting_by_reason gauge\n"
        'vllm:num_requests_waiting_by_reason{reason="capacity"} 50.0\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0",model_name="m"} 4.0\n'
        'vllm:num_requests_waiting{engine="1",model_name="m b{c}"} 3.0\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 5.0\n'
        'tiergate_queue_depth{tier="online"} 2.0\n'
    )
    read = {f.name: [s.value for s in f.samples] for f in families(text, VLLM_GAUGES)}
    assert read == {"vllm:num_requests_waiting": [4.0, 3.0]}
    gateway = families(text, ["tiergate_queue_depth"])
    assert [(s.name, s.labels, s.value) for f in gateway for s in f.samples] == [
        ("tiergate_queue_depth", {"tier": "online"}, 2.0)
    ]
    assert list(families(text, ["absent"])) == []
