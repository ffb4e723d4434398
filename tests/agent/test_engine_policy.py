"""The agent pushes the engine's scheduling policy to the dispatcher when it learns it (the
launch flags in managed mode, a new launch profile, the first refusal of `priority`, the engine
coming back up), and reading `pass_priority` changes nothing (issue 55, part 4).

No engine process: the agent is built in-process and its dispatcher driven with a fake clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from gpu_agent.agent import Agent
from gpu_agent.config import parse_args
from gpu_agent.supervisor import EngineSupervisor
from scheduler import Request, TierConfig, config_to_dict, default_config, parse_config

FCFS = ["vllm", "serve", "demo", "--port", "8101", "--max-num-seqs", "8"]  # vLLM's default policy
PRIORITY = [*FCFS, "--scheduling-policy", "priority"]
FILES = ["--listen", "127.0.0.1:1", "--tier-config", "x", "--keys", "y"]  # never read here


def managed(argv: list[str]) -> Agent:
    options = parse_args(["--engine-cmd", " ".join(argv), *FILES])
    return Agent(options, default_config(), [], supervisor=EngineSupervisor(argv, simulate=True))


def attached(engine_url: str = "http://127.0.0.1:1") -> Agent:
    options = parse_args(["--engine-url", engine_url, *FILES])
    return Agent(options, default_config(), [])


def one_awaiting(**admission: object) -> TierConfig:
    """The seed's tiers, with one request awaiting its first token at a time (a fixed limit)."""
    doc = config_to_dict(default_config())
    doc["scheduler"]["admission"] = {"max_awaiting_first_token": 1, **admission}
    return parse_config(doc)


def test_the_launch_flags_reach_the_dispatcher_before_any_request() -> None:
    assert not managed(FCFS).driver.dispatcher.engine_priority
    assert managed(PRIORITY).driver.dispatcher.engine_priority


def test_a_hot_reconfigure_against_an_fcfs_engine_leaves_the_dispatcher_on_fcfs() -> None:
    agent = managed(FCFS)
    dispatcher = agent.driver.dispatcher
    assert not agent.pass_priority and not dispatcher.engine_priority
    agent.apply_tier_config(one_awaiting(pass_priority=True), version=2)
    assert agent.config.scheduler.admission.pass_priority
    assert not dispatcher.engine_priority  # no request has arrived since
    # What the flag decides: under fcfs a less urgent request awaiting its first token in the
    # engine delays an online one sent after it, so it counts against online's limit.
    assert [r.id for r in dispatcher.poll(0.0).released] == []
    dispatcher.arrive(Request("b1", "batch", 10, 10), 0.0)
    assert [r.id for r in dispatcher.poll(0.0).released] == ["b1"]
    dispatcher.arrive(Request("o1", "online", 10, 10), 0.001)
    assert dispatcher.poll(0.001).released == []  # held: b1 awaits ahead of it in the engine


def test_against_a_priority_engine_an_online_request_passes_an_awaiting_batch_one() -> None:
    """The counterpart of the test above: the same events, an engine ordering by priority."""
    agent = managed(PRIORITY)
    agent.apply_tier_config(one_awaiting(), version=2)
    dispatcher = agent.driver.dispatcher
    assert dispatcher.engine_priority
    dispatcher.arrive(Request("b1", "batch", 10, 10), 0.0)
    assert [r.id for r in dispatcher.poll(0.0).released] == ["b1"]
    dispatcher.arrive(Request("o1", "online", 10, 10), 0.001)
    assert [r.id for r in dispatcher.poll(0.001).released] == ["o1"]


def test_a_new_launch_profile_pushes_its_policy() -> None:
    agent = managed(FCFS)
    supervisor = agent.supervisor
    assert supervisor is not None
    supervisor.argv = PRIORITY  # what the reconciler does once the new profile runs
    agent.follow_engine_limits()
    assert agent.driver.dispatcher.engine_priority
    supervisor.argv = FCFS
    agent.follow_engine_limits()
    assert not agent.driver.dispatcher.engine_priority


def test_a_config_without_pass_priority_keeps_the_dispatcher_off_it_on_a_priority_engine() -> None:
    agent = managed(PRIORITY)
    agent.apply_tier_config(one_awaiting(pass_priority=False), version=2)
    assert not agent.driver.dispatcher.engine_priority and not agent.pass_priority
    agent.apply_tier_config(one_awaiting(pass_priority=True), version=3)
    assert agent.driver.dispatcher.engine_priority and agent.pass_priority


@pytest.mark.parametrize("argv", [FCFS, PRIORITY])
def test_reading_pass_priority_changes_nothing(argv: list[str]) -> None:
    agent = managed(argv)
    agent.apply_tier_config(one_awaiting(pass_priority=True), version=2)
    dispatcher = agent.driver.dispatcher
    before = dispatcher.engine_priority
    assert agent.pass_priority == before  # the getter and the dispatcher agree already
    assert agent.pass_priority == before
    assert dispatcher.engine_priority == before
    dispatcher.engine_policy(priority=not before)  # out of step on purpose
    assert dispatcher.engine_priority != before
    assert agent.pass_priority == before  # the getter reads the agent's facts...
    assert dispatcher.engine_priority != before  # ...and writes nothing


def test_a_refusal_of_priority_reaches_the_dispatcher_at_once() -> None:
    agent = attached()
    dispatcher = agent.driver.dispatcher
    assert dispatcher.engine_priority  # attached: assumed until the engine refuses
    agent.engine_refuses_priority = True  # what the gateway does on vLLM's refusal
    assert not dispatcher.engine_priority
    agent.apply_tier_config(one_awaiting(pass_priority=True), version=2)
    assert not dispatcher.engine_priority  # the engine's refusal outlives a reconfigure


@pytest.fixture
async def engine_url() -> AsyncIterator[str]:
    """An engine that answers /health and an empty /metrics: enough for a telemetry tick."""

    async def empty(request: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/health", empty)
    app.router.add_get("/metrics", empty)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_an_engine_coming_back_up_lifts_the_refusal_in_the_dispatcher(
    engine_url: str,
) -> None:
    agent = attached(engine_url)
    dispatcher = agent.driver.dispatcher
    try:
        await agent.telemetry.tick()  # the engine is up
        agent.engine_refuses_priority = True
        assert not agent.pass_priority and not dispatcher.engine_priority
        await agent.telemetry.tick()  # still the same run: the refusal holds
        assert not dispatcher.engine_priority
        agent.telemetry.engine_health = "down"  # as a tick that found it down leaves it
        await agent.telemetry.tick()  # back up, perhaps restarted with the priority policy
        assert dispatcher.engine_priority and agent.pass_priority
    finally:
        await agent.telemetry.aclose()
