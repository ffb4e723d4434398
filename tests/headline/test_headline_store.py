"""manage.py headline --from-workdir: a finished experiment's arms become ordinary benchmark
runs (samples, summary, snapshot) that the bench app's compare works on."""

from __future__ import annotations

import json
import shlex
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command, load_command_class

from console.bench.choices import RunStatus
from console.bench.headline.options import check, options_from_args
from console.bench.headline.store import flags_to_args
from console.bench.headline.workload import MODEL, SEED_TIER_CONFIG, TIER_PROFILES, engine_flags
from console.bench.models import BenchmarkRun
from console.bench.sides import compare_runs
from loadgen import RequestSample, summarize

ROOT = Path(__file__).resolve().parents[2]


def _arm_files(tmp: Path, key: str, policy: str, ttft: float, gateway: bool) -> dict[str, Any]:
    t0 = 1_800_000_000.0
    samples = [
        RequestSample(index=i, send_time=t0 + i * 0.1, tier=("online", "batch", "offline")[i % 3],
                      ttft=ttft * (1 + i % 5), e2e=1.0 + ttft, output_tokens=64,
                      prompt_tokens=130, status=200)
        for i in range(60)
    ]  # fmt: skip
    window = (t0, t0 + 8.0)
    result = {
        "spec": {"base_url": "http://127.0.0.1:9/v1", "model": MODEL, "rate": 7.5,
                 "duration_s": 6.0, "prompts_file": "/tmp/gone.jsonl", "api_key": None},
        "started_at": t0 - 1, "finished_at": t0 + 9, "window": list(window), "cancelled": False,
        "summary": summarize(samples, window), "timeseries": [], "validity": {"flags": []},
        "samples": [s.to_dict() for s in samples],
    }  # fmt: skip
    (tmp / f"arm-{key}.json").write_text(json.dumps(result), encoding="utf-8")
    return {
        "key": key, "name": f"arm-{key}", "title": f"arm {key}", "via_gateway": gateway,
        "engine_flags": engine_flags(policy, 1.0, 1),
        "tier_config": SEED_TIER_CONFIG if gateway else None,
        "engine": {"gpu": "simulated llama-8b-h100-80g", "preemptions": 0},
        "gateway_rejections": {},
    }  # fmt: skip


@pytest.mark.django_db
def test_stored_arms_are_comparable_benchmark_runs(tmp_path: Path) -> None:
    arms = [
        _arm_files(tmp_path, "a", "fcfs", 0.9, gateway=False),
        _arm_files(tmp_path, "d", "priority", 0.1, gateway=True),
    ]
    doc = {
        "experiment": "headline", "command": "manage.py headline", "started_at": 1.8e9,
        "hardware": "simulated", "time_scale": 1.0, "seed_tier_config": SEED_TIER_CONFIG,
        "workload": {"rate_rps": 7.5, "seed": 1, "tiers": TIER_PROFILES},
        "machine": {"start": {"cpus": 2}}, "arms": arms,
    }  # fmt: skip
    (tmp_path / "headline.json").write_text(json.dumps(doc), encoding="utf-8")
    out = StringIO()
    call_command("headline", from_workdir=tmp_path, stdout=out)

    runs = {r.label.split()[1]: r for r in BenchmarkRun.objects.all()}
    assert set(runs) == {"(a)", "(d)"}, out.getvalue()
    a, d = runs["(a)"], runs["(d)"]
    for run in (a, d):
        assert run.status == RunStatus.SUCCEEDED
        assert run.samples.count() == 60
        assert run.workload["prompts_file"] is None
        assert run.tier_profiles["offline"]["max_tokens"] == 256
    assert a.endpoint.kind == "vllm" and d.endpoint.kind == "gateway"
    assert not d.endpoint.has_api_key
    comparison = compare_runs(a, d)
    paths = {row["path"] for row in comparison["config_diff"]}
    assert "node.engine.args.scheduling_policy" in paths
    assert "online" in comparison["tiers"]
    # Storing again makes new runs on the same endpoints, not duplicate endpoints.
    call_command("headline", from_workdir=tmp_path, stdout=StringIO())
    assert BenchmarkRun.objects.count() == 4
    assert BenchmarkRun.objects.values("endpoint").distinct().count() == 2


@pytest.mark.django_db
def test_the_command_refuses_bad_options_before_running_anything(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"headline\.json: not found"):
        call_command("headline", from_workdir=tmp_path)
    with pytest.raises(CommandError, match="--no-search"):
        call_command("headline", engine="vllm", vllm_model="m", workdir=tmp_path)
    with pytest.raises(CommandError, match="--vllm-model: required"):
        call_command("headline", engine="vllm", no_search=True, workdir=tmp_path)
    with pytest.raises(CommandError, match="--vllm-model: only with --engine vllm"):
        call_command("headline", vllm_model="m", workdir=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing started, nothing written
    assert BenchmarkRun.objects.count() == 0


def test_flags_to_args() -> None:
    args = flags_to_args(
        [
            "--max-num-seqs", "32", "--enable-prefix-caching",
            "--gpu-memory-utilization", "0.85", "--scheduling-policy", "fcfs",
        ]
    )  # fmt: skip
    assert args == {"max_num_seqs": 32, "enable_prefix_caching": True,
                    "gpu_memory_utilization": 0.85, "scheduling_policy": "fcfs"}  # fmt: skip


def _documented(program: str) -> list[list[str]]:
    """Every `<program> ...` command line in the README and the how-to docs, as argument lists
    (docs/performance.md's figures and their commands are measurements, not read by tests)."""
    found = []
    docs = [d for d in sorted((ROOT / "docs").glob("*.md")) if d.name != "performance.md"]
    for doc in [ROOT / "README.md", *docs]:
        # A command continued with a trailing backslash is one line.
        text = doc.read_text(encoding="utf-8").replace("\\\n", " ")
        for line in text.splitlines():
            _, sep, rest = line.partition(program + " ")
            if sep and rest.startswith("--") and "..." not in rest:
                found.append(shlex.split(rest.split("#")[0]))
    return found


def test_the_documented_command_lines_still_parse() -> None:
    """Every `manage.py headline` command the docs give parses (MODEL stands for a model)."""
    manage_lines = _documented("manage.py headline")
    assert manage_lines
    command = load_command_class("console.bench", "headline")
    for argv in manage_lines:
        args = command.create_parser("manage.py", "headline").parse_args(argv)
        assert check(args) is None, argv
        if args.from_workdir is None:
            opts = options_from_args(args, ["manage.py", "headline", *argv])
            assert (opts.vllm is not None) == (args.engine == "vllm")
            assert opts.vllm is None or opts.vllm.argv(8000, ["--x"])[:3] == [
                "vllm", "serve", "MODEL",
            ]  # fmt: skip
