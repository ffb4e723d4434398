"""Arms (z) and (o) end to end on the simulator (which honours vLLM's per-request
`stream_interval` as vLLM does): the lower tiers' streams reach the client in pieces of 16
tokens, asked by the gateway's tier config in (z) and by the client itself in (o); online's
come a token a piece in both."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.bench.headline.arms import Setup, run_arm
from console.bench.headline.catalog import standard_arms
from console.bench.headline.workload import records_needed, write_prompts


@pytest.mark.slow
@pytest.mark.parametrize("key", ["z", "o"])
def test_the_lower_tiers_streams_come_sixteen_tokens_a_piece(tmp_path: Path, key: str) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", records_needed(8.0, 3.0), seed=5)
    setup = Setup(8.0, 2.0, 1.0, 5, 1.0, prompts, tmp_path)
    arm = next(a for a in standard_arms() if a.key == key)
    outcome = run_arm(arm, setup)
    overall = outcome.tier_row("overall")
    assert overall["errors"] == 0 and overall["completed"] == overall["requests"] > 0
    by_tier: dict[str, list[tuple[int, int]]] = {}
    for s in outcome.result.samples:
        if s.error is None and s.output_tokens:
            by_tier.setdefault(s.tier or "", []).append((s.content_chunks, s.output_tokens))
    assert set(by_tier) == {"online", "batch", "offline"}, by_tier.keys()
    for chunks, tokens in by_tier["online"]:
        assert chunks == tokens  # a piece a token: online sets no interval
    for tier in ("batch", "offline"):
        for chunks, tokens in by_tier[tier]:
            assert chunks == 1 + -(-(tokens - 1) // 16), (tier, chunks, tokens)
    record = outcome.to_json()
    assert record["client_stream_interval"] == (16 if key == "o" else None)
    assert record["via_gateway"] == (key == "z")
