"""One-click workloads: a quick smoke test, seed 000's mixed tiers, seed 003's step ladder.

Pure (no Django). A preset is a WorkloadSpec dict without base_url/model, plus optional
per-tier request shapes. The seeds' own durations (3-minute stages, 300 s runs) are scaled
down to demo-sized ones; the shapes (tier shares, ladder steps, token lengths) are kept.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from loadgen.prompts import synthetic_prompt

# Records in a generated prompts file. The load generator cycles through the file, so this
# many distinct prompts keep repeats (and prefix-cache hits they would cause) rare.
PROFILE_RECORDS = 1000


@dataclass(frozen=True)
class PresetDef:
    key: str
    title: str
    description: str
    workload: dict[str, Any]
    tier_profiles: dict[str, dict[str, Any]] = field(default_factory=dict)


PRESETS: dict[str, PresetDef] = {
    p.key: p
    for p in (
        PresetDef(
            "smoke",
            "Quick smoke test",
            "20 short requests at concurrency 4: does the endpoint answer, and how fast.",
            {
                "concurrency": 4,
                "requests": 20,
                "prompt_tokens": 64,
                "max_tokens": 32,
                "slo_ttft_ms": 1000.0,
            },
        ),
        PresetDef(
            "mixed-tiers",
            "Mixed tiers 70/20/10",
            "Seed 000's mixed traffic: 70% online chat (128 in / 64 out), 20% batch "
            "(512 / 128), 10% offline (1024 / 256); concurrency 24 for 20 s after 3 s warmup.",
            {"concurrency": 24, "duration_s": 20.0, "warmup_s": 3.0, "slo_ttft_ms": 1200.0},
            {
                "online": {"weight": 0.7, "prompt_tokens": 128, "max_tokens": 64},
                "batch": {"weight": 0.2, "prompt_tokens": 512, "max_tokens": 128},
                "offline": {"weight": 0.1, "prompt_tokens": 1024, "max_tokens": 256},
            },
        ),
        PresetDef(
            "step-ladder",
            "Step ladder 32 / 128 / 256",
            "Seed 003's ladder: warm up at 32, then 128 and 256 streams (10 s, 15 s, 15 s "
            "instead of 3 minutes each), 512 prompt / 256 output tokens, temperature 0.7; "
            "results cover the last two stages.",
            {
                "stages": [
                    {"concurrency": 32, "duration_s": 10.0},
                    {"concurrency": 128, "duration_s": 15.0},
                    {"concurrency": 256, "duration_s": 15.0},
                ],
                "warmup_s": 10.0,
                "prompt_tokens": 512,
                "max_tokens": 256,
                "temperature": 0.7,
                "slo_ttft_ms": 2000.0,
                "slo_tpot_ms": 100.0,
            },
        ),
    )
}


def preset_workload(key: str, base_url: str, model: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(workload dict for WorkloadSpec.from_dict, tier profiles) of a preset."""
    preset = PRESETS[key]
    workload = {"base_url": base_url, "model": model, **json.loads(json.dumps(preset.workload))}
    if preset.tier_profiles:
        workload["tier_mix"] = {t: p["weight"] for t, p in preset.tier_profiles.items()}
    return workload, json.loads(json.dumps(preset.tier_profiles))


def validate_tier_profiles(profiles: Any) -> dict[str, dict[str, Any]]:
    """Check {"tier": {"weight", "prompt_tokens", "max_tokens"}}; errors name the field."""
    if not isinstance(profiles, dict):
        raise ValueError(
            "tier_profiles: must be an object of tier -> {weight, prompt_tokens, max_tokens}"
        )
    clean: dict[str, dict[str, Any]] = {}
    for tier, shape in profiles.items():
        if not isinstance(shape, dict):
            raise ValueError(f"tier_profiles.{tier}: must be an object")
        weight = shape.get("weight")
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight <= 0:
            raise ValueError(f"tier_profiles.{tier}.weight: must be a number > 0")
        for name in ("prompt_tokens", "max_tokens"):
            value = shape.get(name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"tier_profiles.{tier}.{name}: must be an integer >= 1")
        clean[str(tier)] = {
            "weight": float(weight),
            "prompt_tokens": shape["prompt_tokens"],
            "max_tokens": shape["max_tokens"],
        }
    return clean


def profile_counts(
    profiles: dict[str, dict[str, Any]], total: int = PROFILE_RECORDS
) -> dict[str, int]:
    """Records per tier in proportion to the weights (largest remainders, so they sum to total)."""
    weight_sum = sum(p["weight"] for p in profiles.values())
    exact = {t: total * p["weight"] / weight_sum for t, p in profiles.items()}
    counts = {t: int(v) for t, v in exact.items()}
    for tier in sorted(exact, key=lambda t: exact[t] - counts[t], reverse=True)[
        : total - sum(counts.values())
    ]:
        counts[tier] += 1
    return counts


def prompts_jsonl(
    profiles: dict[str, dict[str, Any]], seed: int = 0, total: int = PROFILE_RECORDS
) -> str:
    """A prompts file (loadgen's JSONL) whose records carry each tier's lengths, in the tier
    shares, shuffled so every stretch of the run sees the mix."""
    rng = random.Random(f"profiles:{seed}")
    records = []
    for tier, count in profile_counts(profiles, total).items():
        shape = profiles[tier]
        for _ in range(count):
            records.append(
                {
                    "prompt": synthetic_prompt(rng, shape["prompt_tokens"]),
                    "max_tokens": shape["max_tokens"],
                    "tier": tier,
                }
            )
    rng.shuffle(records)
    return "".join(json.dumps(r) + "\n" for r in records)
