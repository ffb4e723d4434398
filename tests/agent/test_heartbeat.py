"""The reconciler against a fake console (docs/protocol.md): keys and tier configs from the
reply, apply errors, a console that goes away and comes back, a hot reconfigure under load, and
a restart that comes back with the saved state."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gpu_agent.testing import AgentProcess
from tests.agent.agent_helpers import (
    GATEWAY_KEYS,
    NODE_TOKEN,
    FakeConsole,
    post,
    start_agent,
    tier_config,
)


def console_args(console: FakeConsole, engine_url: str, state_dir: Path) -> list[str]:
    return [
        "--engine-url",
        engine_url,
        "--console",
        console.url,
        "--node-token",
        NODE_TOKEN,
        "--state-dir",
        str(state_dir),
        "--heartbeat-backoff-max",
        "0.5",
    ]


async def launch(args: list[str], log: Path) -> AgentProcess:
    return await asyncio.to_thread(start_agent, args, log)


async def test_it_takes_keys_and_tier_config_from_the_console(
    console: FakeConsole, sim_url: str, tmp_path: Path
) -> None:
    agent = await launch(console_args(console, sim_url, tmp_path / "state"), tmp_path / "a.log")
    try:
        first = await console.wait_beat(lambda b: True)
        assert first["mode"] == "attached" and first["keys_version"] == ""
        assert first["applied"] == {"tier_config": None, "launch_profile": None}
        assert first["listen_url"] == agent.url
        assert (await post(agent)).status_code == 401  # no keys yet

        console.keys_version, console.gateway_keys = "k1", GATEWAY_KEYS
        console.tier_config = {"id": 7, "name": "two tiers", "config": tier_config()}
        beat = await console.wait_beat(
            lambda b: b["keys_version"] == "k1" and b["applied"]["tier_config"] == 7,
            what="keys and config applied",
        )
        assert beat["health"]["gateway"] == "ok"
        assert beat["engine"]["url"] == sim_url and beat["engine"]["simulated"] is True
        assert (await post(agent, "batch")).status_code == 200

        beat = await console.wait_beat(lambda b: b["samples"] and b["samples"][-1]["tiers"])
        sample = beat["samples"][-1]
        assert sample["gpu_source"] == "simulated"
        assert set(sample["tiers"]) == {"online", "batch", "offline"}
        assert {"kv_cache_usage", "running", "waiting"} <= set(sample["engine"])

        # An invalid config is reported and the old one stays.
        console.tier_config = {
            "id": 8,
            "name": "broken",
            "config": {"scheduler": {"queues": {"online": {"priority": 1}}}},
        }
        beat = await console.wait_beat(lambda b: "tier_config" in b.get("apply_errors", {}))
        assert beat["apply_errors"]["tier_config"]["version"] == 8
        assert "max_batch_size" in beat["apply_errors"]["tier_config"]["error"]
        assert beat["applied"]["tier_config"] == 7

        # A launch profile cannot be applied in attached mode: said so.
        console.launch_profile = {"id": 3, "name": "p", "args": {}, "argv": ["vllm", "serve", "m"]}
        beat = await console.wait_beat(lambda b: "launch_profile" in b.get("apply_errors", {}))
        assert "attached mode" in beat["apply_errors"]["launch_profile"]["error"]
    finally:
        agent.stop()

    # A restart with the console gone comes back with the saved keys and tier config.
    await console.stop()
    agent = await launch(console_args(console, sim_url, tmp_path / "state"), tmp_path / "b.log")
    try:
        assert (await post(agent, "batch")).status_code == 200
        status = await asyncio.to_thread(agent.status)
        assert status["applied"]["tier_config"] == 7 and status["keys_version"] == "k1"
    finally:
        agent.stop()


async def test_it_buffers_samples_while_the_console_is_down_and_catches_up(
    console: FakeConsole, sim_url: str, tmp_path: Path
) -> None:
    console.keys_version, console.gateway_keys = "k1", GATEWAY_KEYS
    agent = await launch(console_args(console, sim_url, tmp_path / "state"), tmp_path / "a.log")
    try:
        await console.wait_beat(lambda b: b["keys_version"] == "k1")
        await console.stop()
        before = len(console.beats)
        last_ts = console.beats[-1]["samples"][-1]["ts"] if console.beats[-1]["samples"] else 0
        # The gateway keeps serving while the console is away.
        for _ in range(3):
            assert (await post(agent)).status_code == 200
        await asyncio.sleep(1.5)
        await console.start()
        beat = await console.wait_beat(lambda b: True, what="a beat after the outage")
        assert beat is console.beats[before]  # the first beat after the outage carries it all
        timestamps = [s["ts"] for s in beat["samples"]]
        assert timestamps == sorted(timestamps) and timestamps[0] > last_ts
        assert len(timestamps) >= 2
        finished = sum(s["tiers"]["online"]["finished"] for s in beat["samples"])
        assert finished == 3
        # Back to one beat per interval, carrying only new samples.
        nxt = await console.wait_beat(lambda b: b is not beat and b["samples"])
        assert nxt["samples"][0]["ts"] > timestamps[-1]
    finally:
        agent.stop()


async def test_a_hot_reconfigure_under_load_loses_no_request(
    console: FakeConsole, sim_url: str, tmp_path: Path
) -> None:
    console.keys_version, console.gateway_keys = "k1", GATEWAY_KEYS
    narrow = tier_config({"max_in_flight": 1, "max_awaiting_first_token": 1})
    console.tier_config = {"id": 1, "name": "narrow", "config": narrow}
    agent = await launch(console_args(console, sim_url, tmp_path / "state"), tmp_path / "a.log")
    try:
        await console.wait_beat(lambda b: b["applied"]["tier_config"] == 1)
        tiers = ["online", "batch", "offline"]
        load = [
            asyncio.create_task(post(agent, tiers[i % 3], max_tokens=160, ignore_eos=True))
            for i in range(30)
        ]
        await asyncio.sleep(0.1)
        # The new version drops the batch tier and widens admission while requests wait.
        wide = tier_config({"max_in_flight": 8})
        del wide["scheduler"]["queues"]["batch"]
        console.tier_config = {"id": 2, "name": "wide", "config": wide}
        await console.wait_beat(lambda b: b["applied"]["tier_config"] == 2)
        assert not all(task.done() for task in load), "the load ended before the reconfigure"
        responses = await asyncio.gather(*load)
        assert [r.status_code for r in responses] == [200] * 30
        status = await asyncio.to_thread(agent.status)
        assert set(status["tiers"]) == {"online", "offline"}
        assert status["in_flight"] == 0
    finally:
        agent.stop()
