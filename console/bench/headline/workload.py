"""Seed 000's mixed workload, the engine's launch flags and the tier configs of the arms. Pure.

Workload (seed 000, 4.2: "online and batch requests sent mixed, per priority"): three tiers
with their own request shapes, the same as the console's "mixed-tiers" preset:

    online   70%   128 prompt tokens,  64 output tokens   (chat turns)
    batch    20%   512 prompt tokens, 128 output tokens   (document jobs)
    offline  10%  1024 prompt tokens, 256 output tokens   (evaluation sweeps)

Every arm replays the same requests: the prompts file fixes request i's tier and text, and the
load generator's seeded Poisson clock fixes when request i is sent.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

from loadgen import WorkloadSpec
from loadgen.prompts import synthetic_prompt
from scheduler import config_to_dict, default_config

MODEL = "headline-llama-8b"
TIER_PROFILES: dict[str, dict[str, Any]] = {
    "online": {"weight": 0.7, "prompt_tokens": 128, "max_tokens": 64},
    "batch": {"weight": 0.2, "prompt_tokens": 512, "max_tokens": 128},
    "offline": {"weight": 0.1, "prompt_tokens": 1024, "max_tokens": 256},
}
TIERS = tuple(TIER_PROFILES)

# Seed 000, 3.1's launch line with its two known errors fixed (--scheduling-policy is the real
# flag; --disable-log-requests is gone from recent vLLM). The policy is set per arm.
ENGINE_FLAGS = (
    "--gpu-memory-utilization", "0.85",
    "--max-model-len", "8192",
    "--max-num-seqs", "32",
    "--max-num-batched-tokens", "16384",
    "--enable-prefix-caching",
)  # fmt: skip
# The simulator ends an output early at a drawn EOS unless told otherwise; a mean this far past
# every max_tokens makes each request produce exactly its tier's output length.
SIM_FLAGS = ("--sim-preset", "llama-8b-h100-80g", "--sim-eos-mean-tokens", "1000000")
HARDWARE = "simulated Llama-3-8B bf16 on one H100 SXM 80 GB (gpu_agent.sim llama-8b-h100-80g)"
ENGINES = ("sim", "vllm")
# `--engine vllm`: vLLM's CPU build on the tiny random Llama of tools/vllm_env.py, on one core.
# Its positions stop at 4096; 16 sequences at a time, as the issue that measured it used.
VLLM_FLAGS = (
    "--max-model-len", "4096",
    "--max-num-seqs", "16",
    "--max-num-batched-tokens", "16384",
    "--enable-prefix-caching",
)  # fmt: skip
VLLM_HARDWARE = (
    "real vLLM {version} (CPU build) on a tiny random Llama ({layers} layers, hidden {hidden}), "
    "one CPU core"
)

# Seed 000, 3.2, verbatim (scheduler.default_config is that JSON): the tier config arms (c)
# and (d) run.
SEED_TIER_CONFIG: dict[str, Any] = config_to_dict(default_config())
TIER_PRIORITY = {t: SEED_TIER_CONFIG["scheduler"]["queues"][t]["priority"] for t in TIERS}


def engine_flags(policy: str, time_scale: float, seed: int, engine: str = "sim") -> list[str]:
    if engine == "vllm":
        return [*VLLM_FLAGS, "--scheduling-policy", policy, "--served-model-name", MODEL]
    flags = [*ENGINE_FLAGS, "--scheduling-policy", policy, *SIM_FLAGS]
    flags += ["--sim-seed", str(seed), "--sim-time-scale", f"{time_scale:g}"]
    return flags


def with_admission(config: dict[str, Any], **admission: Any) -> dict[str, Any]:
    """A copy of `config` with these `admission` settings (None removes a setting)."""
    out = copy.deepcopy(config)
    adm = out["scheduler"].setdefault("admission", {})
    for key, value in admission.items():
        if value is None:
            adm.pop(key, None)
        else:
            adm[key] = value
    if not adm:
        del out["scheduler"]["admission"]
    return out


def with_waits(config: dict[str, Any], waits_ms: dict[str, int]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for tier, wait in waits_ms.items():
        out["scheduler"]["queues"][tier]["max_waiting_time_ms"] = wait
    return out


def prompts_records(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` requests in the tier shares, each tier drawn independently per request."""
    rng = random.Random(f"headline:{seed}")
    weights = [TIER_PROFILES[t]["weight"] for t in TIERS]
    records = []
    for _ in range(count):
        tier = rng.choices(TIERS, weights=weights, k=1)[0]
        shape = TIER_PROFILES[tier]
        records.append(
            {
                "prompt": synthetic_prompt(rng, shape["prompt_tokens"]),
                "max_tokens": shape["max_tokens"],
                "tier": tier,
            }
        )
    return records


def write_prompts(path: Path, count: int, seed: int) -> Path:
    lines = (json.dumps(r) + "\n" for r in prompts_records(count, seed))
    path.write_text("".join(lines), encoding="utf-8")
    return path


def records_needed(rate: float, seconds: float) -> int:
    """Enough distinct prompts that the loadgen's cycling never repeats one (a repeat would be
    a prefix-cache hit no other arm is guaranteed to get at the same moment)."""
    return int(rate * seconds * 1.5) + 200


def arm_spec(
    *,
    base_url: str,
    prompts_file: Path,
    rate: float | None,
    duration_s: float,
    warmup_s: float,
    seed: int,
    api_key: str | None = None,
    tier_priority: dict[str, int] | None = None,
    concurrency: int | None = None,
) -> WorkloadSpec:
    return WorkloadSpec(
        base_url=base_url + "/v1",
        model=MODEL,
        api_key=api_key,
        rate=rate,
        concurrency=concurrency,
        arrival="poisson",
        duration_s=duration_s,
        warmup_s=warmup_s,
        prompts_file=str(prompts_file),
        seed=seed,
        tier_priority=dict(tier_priority or {}),
        timeout_s=300.0,
    )
