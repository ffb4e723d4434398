"""`python -m gpu_agent.sim serve` takes vLLM's flags, with vLLM's rules and errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_agent.sim.config import PRESETS, parse_args


def serve(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_agent.sim", "serve", "m", *flags],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("flag", ["--scheduler-policy", "--disable-log-requests"])
def test_flags_vllm_does_not_know_are_unrecognized(flag: str) -> None:
    result = serve(flag, "priority") if flag == "--scheduler-policy" else serve(flag)
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr and flag in result.stderr


def test_batched_tokens_below_max_model_len_needs_chunked_prefill() -> None:
    result = serve("--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048")
    assert result.returncode == 2
    assert "max_num_batched_tokens (2048) is smaller than max_model_len (8192)" in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--max-num-batched-tokens", "64", "--max-num-seqs", "128"],
            "must be greater than or equal to max_num_seqs",
        ),
        (["--gpu-memory-utilization", "0"], "--gpu-memory-utilization must be in (0, 1]"),
        (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be in (0, 1]"),
        (["--scheduling-policy", "lifo"], "invalid choice"),
        (["--sim-preset", "tiny-test", "--max-model-len", "100000"], "larger than the maximum"),
        (["--sim-weight-bytes", str(10**12)], "No available memory for the cache blocks"),
        (["--sim-kv-bytes-per-token", "0"], "--sim-kv-bytes-per-token must be positive"),
        (["--sim-decode-s-per-seq=-1e-5"], "--sim-decode-s-per-seq must be zero or more"),
        (["--sim-cpu-gap-s", "nan"], "--sim-cpu-gap-s must be zero or more"),
        (["--sim-time-scale", "nan"], "--sim-time-scale must be a positive number"),
        (["--sim-eos-mean-tokens", "-5"], "--sim-eos-mean-tokens must be at least 1"),
    ],
)
def test_invalid_combinations_exit_2_with_a_clear_message(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["serve", "m", *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_defaults_follow_vllm() -> None:
    config = parse_args(["serve", "meta-llama/Llama-3.1-8B-Instruct"])
    assert (config.max_num_seqs, config.max_num_batched_tokens, config.max_model_len) == (
        256,
        8192,
        8192,
    )
    assert config.enable_prefix_caching and config.enable_chunked_prefill
    assert config.async_scheduling and config.scheduling_policy == "fcfs"
    assert config.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    unchunked = parse_args(["serve", "m", "--no-enable-chunked-prefill"])
    assert unchunked.max_num_batched_tokens == 8192  # max(max_model_len, 2048)


def test_sim_flags_override_the_preset_and_size_the_cache() -> None:
    config = parse_args(
        [
            "serve",
            "m",
            "--served-model-name",
            "a",
            "b",
            "--sim-kv-bytes-per-token",
            "262144",
            "--gpu-memory-utilization",
            "0.5",
        ]
    )
    assert config.served_model_names == ("a", "b") and config.model_name == "a"
    hw = PRESETS["llama-8b-h100-80g"]
    assert config.hardware.kv_bytes_per_token == 262144
    assert config.hardware.prefill_s_per_token == hw.prefill_s_per_token
    expected = int((hw.gpu_memory_bytes * 0.5 - hw.weight_bytes) // (262144 * 16))
    assert config.num_gpu_blocks == expected


def test_llama_8b_preset_matches_public_figures() -> None:
    hw = PRESETS["llama-8b-h100-80g"]
    assert hw.kv_bytes_per_token == 128 * 1024
    # ~29k blocks: about 465k tokens of KV at 0.9 utilisation, as vLLM logs on an H100.
    assert 440_000 < parse_args(["serve", "m"]).num_gpu_blocks * 16 < 480_000
