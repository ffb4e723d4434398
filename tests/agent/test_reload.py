"""Standalone mode: SIGHUP re-reads the tier config and keys files and applies them hot; a bad
file is refused and the running config stays."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from tests.agent.agent_helpers import (
    ALL_KEY,
    KEYS,
    MODEL,
    queue,
    standalone_args,
    start_agent,
    tier_config,
    write_json,
)
from tests.waiting import wait_for

NEW_KEY = "tgk_test_new_key_00112233445566778899aabbccddeeff"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def post(url: str, key: str, tier: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {key}"}
    if tier:
        headers["X-Tiergate-Tier"] = tier
    return httpx.post(url + "/v1/chat/completions", json=BODY, headers=headers).status_code


def test_sighup_reloads_the_files_and_refuses_a_bad_one(sim_url: str, tmp_path: Path) -> None:
    args = standalone_args(tmp_path, sim_url, tier_config())
    with start_agent(args, tmp_path / "agent.log") as agent:
        assert post(agent.url, ALL_KEY) == 200
        write_json(tmp_path / "tiers.json", tier_config(urgent=queue(0)))
        new_keys = [{"name": "new", "key": NEW_KEY, "tiers": ["urgent"], "default_tier": "urgent"}]
        write_json(tmp_path / "keys.json", new_keys)
        agent.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "urgent" in agent.status()["tiers"], what="the new tier")
        assert post(agent.url, NEW_KEY) == 200
        assert post(agent.url, ALL_KEY) == 401

        (tmp_path / "tiers.json").write_text('{"scheduler": {"queues": {}}}')
        write_json(tmp_path / "keys.json", KEYS)
        agent.process.send_signal(signal.SIGHUP)
        status = wait_for(
            lambda: (s := agent.status())["apply_errors"].get("reload") and s, what="refusal"
        )
        assert "tiers.json" in status["apply_errors"]["reload"]["error"]
        assert "urgent" in status["tiers"]
        assert post(agent.url, NEW_KEY, "urgent") == 200
