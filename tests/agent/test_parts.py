"""The agent's pure parts and its command line: engine /metrics parsing, interval stats, keys,
launch argv handling, backoff, the no-NVML path, and exit code 2 for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest
from aiohttp import web

from gpu_agent.__main__ import main
from gpu_agent.config import parse_args
from gpu_agent.keys import KeysError, hash_key, parse_keys
from gpu_agent.metrics import IntervalStats, percentile
from gpu_agent.nvml import NvmlReader
from gpu_agent.reconciler import next_backoff
from gpu_agent.sim.testing import free_port
from gpu_agent.supervisor import engine_argv, engine_url_of, launch_args
from gpu_agent.telemetry import (
    ENGINE_METRICS,
    LEGACY_ENGINE_METRICS,
    Telemetry,
    engine_figures,
    parse_engine_metrics,
)
from scheduler import AsyncDispatcher, Dispatcher, default_config
from tests.agent.agent_helpers import ROOT, write_json

NEW_METRICS = """\
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 1.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name="m"} 100.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name="m"} 40.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{model_name="m"} 2.0
"""
OLD_METRICS = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.75
"""


def test_it_reads_vllms_metric_names() -> None:
    figures = parse_engine_metrics(NEW_METRICS)
    assert figures["kv_cache_usage"] == 0.25
    assert figures["running"] == 3 and figures["waiting"] == 1
    assert figures["preemptions_total"] == 2


def test_it_falls_back_to_the_old_kv_cache_name() -> None:
    assert parse_engine_metrics(OLD_METRICS)["kv_cache_usage"] == 0.75
    both = parse_engine_metrics(NEW_METRICS + OLD_METRICS)
    assert both["kv_cache_usage"] == 0.25


# The rest of a real vLLM's /metrics, which the agent skips before parsing: histograms, look-alike
# names, `_created` samples, a second engine's label set, HELP text with braces and quotes.
NOISE = """\
# HELP vllm:num_requests_waiting_by_reason Requests waiting {by reason} "quoted".
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{model_name="m",reason="capacity"} 50.0
# HELP vllm:time_to_first_token_seconds Histogram of TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 5.0
vllm:time_to_first_token_seconds_count{model_name="m"} 5.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.7
# TYPE vllm:num_requests_running_max gauge
vllm:num_requests_running_max{model_name="m"} 16.0
"""


def _parse_whole(text: str) -> dict[str, float]:
    """What the agent read before it skipped lines: the library over the whole exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    names = {**LEGACY_ENGINE_METRICS, **ENGINE_METRICS}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        name = family.name.removesuffix("_total")
        if name in names and family.samples:
            total = sum(s.value for s in family.samples if not s.name.endswith("_created"))
            out[names[name]] = out.get(names[name], 0.0) + total
    return out


def test_skipping_the_unread_lines_reads_what_the_whole_text_does() -> None:
    second_engine = {  # a second label set right after the first, as exporters write them
        '{model_name="m"} 3.0\n': '{model_name="m"} 3.0\n'
        'vllm:num_requests_running{model_name="m",engine="1",label="a b{c}"} 2.0\n',
        'vllm:num_preemptions_total{model_name="m"} 2.0\n': "vllm:num_preemptions_total"
        '{model_name="m"} 2.0\nvllm:num_preemptions_total{model_name="m",engine="1"} 5.0\n',
        '_total{model_name="m"} 100.0\n': '_total{model_name="m"} 100.0\n'
        'vllm:prefix_cache_queries_created{model_name="m"} 1.7e+09\n',
    }
    text = NEW_METRICS
    for old, new in second_engine.items():
        assert old in text
        text = text.replace(old, new)
    text = NOISE + text + NOISE
    figures = parse_engine_metrics(text)
    assert figures == _parse_whole(text)
    assert figures["running"] == 5 and figures["waiting"] == 1  # not the look-alike's 50
    assert figures["preemptions_total"] == 7 and figures["prefix_queries"] == 100
    assert parse_engine_metrics(NOISE) == {}
    assert parse_engine_metrics("") == {}


def test_the_prefix_hit_rate_covers_the_interval() -> None:
    before = parse_engine_metrics(NEW_METRICS)
    now = {**before, "prefix_queries": 200.0, "prefix_hits": 130.0}
    assert engine_figures(now, before)["prefix_hit_rate"] == pytest.approx(0.9)
    assert engine_figures(before, None)["prefix_hit_rate"] is None
    assert engine_figures(before, before)["prefix_hit_rate"] is None  # no lookups: unknown


def test_interval_stats_cover_only_their_interval() -> None:
    stats = IntervalStats()
    for ttft in (0.1, 0.2, 0.3, 0.4):
        stats.finished("online", ttft, ok=True)
    stats.finished("online", None, ok=False)
    stats.rejected("batch")
    taken = stats.take()
    assert taken["online"] == {
        "finished": 5,
        "errors": 1,
        "rejected": 0,
        "ttft_p50_s": 0.2,
        "ttft_p99_s": 0.4,
    }
    assert taken["batch"]["rejected"] == 1 and taken["batch"]["ttft_p50_s"] is None
    assert stats.take() == {}
    assert percentile([], 0.5) is None
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0


def test_keys_are_kept_only_as_hashes_and_checked() -> None:
    keys = parse_keys(
        [{"name": "a", "key": "secret", "tiers": ["online"], "default_tier": "online"}]
    )
    assert keys[0].sha256 == hash_key("secret") and "secret" not in repr(keys[0])
    assert keys[0].pick_tier(None) == "online"
    assert keys[0].pick_tier("offline") is None
    bad: list[tuple[Any, str]] = [
        ({"name": "a"}, "needs 'key' or 'sha256'"),
        ({"name": "a", "sha256": "zz", "tiers": ["x"]}, "sha256: must be 64 hex digits"),
        ({"name": "a", "key": "k", "tiers": []}, "tiers: must be a non-empty list"),
        ({"name": "a", "key": "k", "tiers": ["x"], "default_tier": "y"}, "default_tier"),
    ]
    for item, message in bad:
        with pytest.raises(KeysError, match=message):
            parse_keys([item])


def test_launch_argv_gives_the_engine_address_and_args() -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--port",
        "8123",
        "--max-num-seqs",
        "64",
        "--gpu-memory-utilization",
        "0.85",
        "--enable-prefix-caching",
        "--no-async-scheduling",
    ]
    assert engine_url_of(argv) == "http://127.0.0.1:8123"
    assert engine_url_of(["vllm", "serve", "m", "--host=0.0.0.0"]) == "http://127.0.0.1:8000"
    assert launch_args(argv) == {
        "model": "m",
        "port": 8123,
        "max_num_seqs": 64,
        "gpu_memory_utilization": 0.85,
        "enable_prefix_caching": True,
        "async_scheduling": False,
    }
    assert engine_argv(argv, simulate=True)[:4] == [sys.executable, "-m", "gpu_agent.sim", "serve"]
    assert engine_argv(argv, simulate=False) == argv


def test_backoff_doubles_up_to_its_cap() -> None:
    delays, delay = [], 0.0
    for _ in range(6):
        delay = next_backoff(delay, 1.0, 10.0)
        delays.append(delay)
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


class NoNvml:
    """pynvml's surface as on a machine without the driver: init fails."""

    NVMLError = pynvml.NVMLError
    inits = 0

    def nvmlInit(self) -> None:
        NoNvml.inits += 1
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


def test_without_nvml_the_reader_reports_none_and_tries_once() -> None:
    reader = NvmlReader(NoNvml())
    assert reader.read() is None and reader.read() is None
    assert NoNvml.inits == 1
    assert "NVML unavailable" in reader.error


async def test_a_sample_without_nvml_or_simulator_has_gpu_source_none() -> None:
    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=NEW_METRICS)

    async def catch_all(request: web.Request) -> web.Response:  # a proxy's page, not the sim's
        return web.Response(text="<html>welcome</html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/sim/v1/gpu", catch_all)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    driver = AsyncDispatcher(Dispatcher(default_config()))
    telemetry = Telemetry(
        lambda: f"http://127.0.0.1:{port}", driver.stats, IntervalStats(), nvml=NvmlReader(NoNvml())
    )
    try:
        sample = await telemetry.tick()
    finally:
        await telemetry.aclose()
        await runner.cleanup()
    assert sample["gpu_source"] == "none" and sample["gpus"] == []
    assert sample["engine"]["kv_cache_usage"] == 0.25
    assert telemetry.engine_health == "ok" and telemetry.simulated is False
    assert set(sample["tiers"]) == {"online", "batch", "offline"}
    assert telemetry.since(0) == (1, [sample])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_agent", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The command line in-process (argparse errors raise SystemExit): fast enough to try
    many bad inputs; one case below also runs as a real process."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_bad_input_exits_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good_keys = write_json(
        tmp_path / "keys.json",
        [{"name": "a", "key": "k", "tiers": ["online"], "default_tier": "online"}],
    )
    bad_tiers = write_json(
        tmp_path / "bad.json", {"scheduler": {"queues": {"online": {"priority": 1}}}}
    )
    (tmp_path / "broken.json").write_text("[{")
    base = ["--engine-url", "http://127.0.0.1:1", "--listen", "127.0.0.1:1"]
    cases = [
        (
            [*base, "--tier-config", str(tmp_path / "missing.json"), "--keys", str(good_keys)],
            "missing.json",
        ),
        ([*base, "--tier-config", str(bad_tiers), "--keys", str(good_keys)], "max_batch_size"),
        (
            [*base, "--tier-config", str(ROOT / "data/none.json"), "--keys", str(good_keys)],
            "none.json",
        ),
        ([*base, "--tier-config", str(bad_tiers)], "--keys"),
        (["--listen", "127.0.0.1:1", "--tier-config", "x", "--keys", "y"], "--engine-url"),
        ([*base, "--heartbeat-backoff-max", "0"], "--heartbeat-backoff-max"),
        ([*base, "--upstream-read-timeout", "nan"], "must be a positive number of seconds"),
        ([*base, "--engine-start-timeout", "-3"], "--engine-start-timeout"),
        ([*base, "--engine-nice", "20"], "--engine-nice"),
        ([*base, "--engine-nice", "-1"], "--engine-nice"),
        ([*base, "--client-write-timeout", "0"], "--client-write-timeout"),
        ([*base, "--client-buffer-bytes", "16MiB"], "--client-buffer-bytes"),
        ([*base, "--client-buffer-total-bytes", "-1"], "--client-buffer-total-bytes"),
    ]
    for args, named in cases:
        code, err = run_main(capsys, *args)
        assert code == 2, (args, err)
        assert named in err, (named, err)


def test_a_malformed_keys_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiers = {
        "scheduler": {
            "queues": {
                "online": {
                    "max_batch_size": 8,
                    "max_waiting_time_ms": 10,
                    "max_tokens_per_batch": 4096,
                    "priority": 1,
                }
            }
        }
    }
    tiers_file = write_json(tmp_path / "tiers.json", tiers)
    (tmp_path / "broken.json").write_text("[{")
    wrong_tier = write_json(
        tmp_path / "wrong.json",
        [{"name": "a", "key": "k", "tiers": ["batch"], "default_tier": "batch"}],
    )
    base = [
        "--engine-url",
        "http://127.0.0.1:1",
        "--listen",
        "127.0.0.1:1",
        "--tier-config",
        str(tiers_file),
    ]
    result = run_cli(*base, "--keys", str(tmp_path / "broken.json"))
    assert result.returncode == 2 and "invalid JSON at line 1" in result.stderr
    code, err = run_main(capsys, *base, "--keys", str(wrong_tier))
    assert code == 2 and "'batch'" in err


def test_the_listen_url_reported_to_the_console_is_reachable() -> None:
    base = ["--engine-url", "http://127.0.0.1:8001", "--node-token", "t"]
    local = parse_args([*base, "--listen", "0.0.0.0:9100", "--console", "http://127.0.0.1:8000"])
    assert local.listen_url == "http://127.0.0.1:9100"
    fixed = parse_args([*base, "--listen", "127.0.0.1:9101", "--console", "http://c:8000"])
    assert fixed.listen_url == "http://127.0.0.1:9101"
    told = parse_args(
        [
            *base,
            "--listen",
            "0.0.0.0:9100",
            "--console",
            "http://c:8000",
            "--advertise-url",
            "http://gpu-a-01:9100/",
        ]
    )
    assert told.listen_url == "http://gpu-a-01:9100"
    assert local.resolve_listen_url() == ("http://127.0.0.1:9100", True)
    # A console name that does not resolve: 127.0.0.1 stands in, and it is not settled.
    lost = parse_args(
        [*base, "--listen", "0.0.0.0:9100", "--console", "http://no-such-host.invalid:8000"]
    )
    assert lost.resolve_listen_url() == ("http://127.0.0.1:9100", False)
    six = parse_args([*base, "--listen", "[::]:9100", "--console", "http://[::1]:8000"])
    assert six.resolve_listen_url() == ("http://[::1]:9100", True)
