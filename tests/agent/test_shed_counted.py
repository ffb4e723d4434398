"""Overload made visible (issue 57, item 5), with real processes: the gateway in front of the
simulator (one sequence at a time), pushed past what it serves. Every request the gateway sheds
(503 `queue_timeout` past the sojourn bound, 429 `queue_full` past a queue's depth) shows per
tier in its /metrics as `tiergate_shed_total{tier, reason}`, exactly as many as the clients
got; and the load generator's summary counts the same answers as `shed`, per tier, apart from
its errors. Counts, never milliseconds: the overload is many times what the engine serves."""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import AgentProcess
from loadgen import WorkloadSpec, run_workload
from scheduler import config_to_dict, default_config
from tests.agent.agent_helpers import ALL_KEY, MODEL, engine_read, standalone_args, start_agent

SIM = ("--max-num-seqs", "1", "--scheduling-policy", "priority",
       "--sim-decode-s-per-seq", "0.02")  # fmt: skip
BATCH_DEPTH = 3


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """Online waits at most 600 ms in the gateway (`shed_after_ms`), batch's queue holds 3."""
    config = copy.deepcopy(config_to_dict(default_config()))
    config["scheduler"]["admission"] = {
        "max_in_flight": 1, "lifo_after_ms": 200, "shed_after_ms": 600, "min_share": 0}  # fmt: skip
    config["scheduler"]["queues"]["batch"]["max_queue_depth"] = BATCH_DEPTH
    tmp = tmp_path_factory.mktemp("shed")
    with (
        run_sim_process(MODEL, SIM) as sim,
        start_agent(standalone_args(tmp, sim, config), tmp / "agent.log") as proc,
    ):
        yield proc


def shed_counts(agent: AgentProcess) -> Counter[tuple[str, str]]:
    """tiergate_shed_total by (tier, reason), from the agent's /metrics."""
    text = httpx.get(agent.url + "/metrics", timeout=10).text
    out: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "tiergate_shed_total":
                out[(s.labels["tier"], s.labels["reason"])] += int(s.value)
    return out


async def one(client: httpx.AsyncClient, url: str, tier: str) -> tuple[str, int, str]:
    """(tier, status, the error code of a refusal or "")."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4, "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {ALL_KEY}", "X-Tiergate-Tier": tier}
    async with client.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        data = await r.aread()
    code = "" if r.status_code == 200 else str(json.loads(data)["error"]["code"])
    return tier, r.status_code, code


async def test_every_shed_request_is_counted_per_tier_in_the_gateways_metrics(
    agent: AgentProcess,
) -> None:
    await engine_read(agent)  # what the agent learns on its first tick
    before = shed_counts(agent)
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=100)) as c:
        online = [asyncio.create_task(one(c, agent.url, "online")) for _ in range(40)]
        await asyncio.sleep(0.05)
        batch = [asyncio.create_task(one(c, agent.url, "batch")) for _ in range(12)]
        done = await asyncio.wait_for(asyncio.gather(*online, *batch), 30)
    answers = Counter((tier, status, code) for tier, status, code in done)
    # 40 online at ~0.1 s each, one at a time, with a 0.6 s bound: most are shed (503); batch
    # waits behind online (no share), so past its 3 queued it is refused at once (429).
    assert answers[("online", 503, "queue_timeout")] >= 20, answers
    assert answers[("batch", 429, "queue_full")] >= 12 - BATCH_DEPTH, answers
    assert set(answers) <= {
        ("online", 200, ""),
        ("batch", 200, ""),
        ("online", 503, "queue_timeout"),
        ("batch", 503, "queue_timeout"),
        ("batch", 429, "queue_full"),
    }, answers
    after = shed_counts(agent)
    for tier, reason, status in (("online", "queue_timeout", 503), ("batch", "queue_timeout", 503),
                                 ("batch", "queue_full", 429)):  # fmt: skip
        counted = after[(tier, reason)] - before[(tier, reason)]
        assert counted == answers[(tier, status, reason)], (tier, reason, counted, answers)
    assert after[("offline", "queue_timeout")] == after[("offline", "queue_full")] == 0


async def test_the_load_generator_counts_the_same_answers_as_shed_per_tier(
    agent: AgentProcess,
) -> None:
    await asyncio.sleep(1.0)  # the last test's backlog has drained (every request answered)
    before = shed_counts(agent)
    spec = WorkloadSpec(
        base_url=agent.url + "/v1", model=MODEL, api_key=ALL_KEY, rate=100.0,
        arrival="constant", requests=60, prompt_tokens=8, max_tokens=4, timeout_s=30.0,
        tier_mix={"online": 0.6, "batch": 0.4}, seed=3,
    )  # fmt: skip
    result = await run_workload(spec)
    after = shed_counts(agent)
    summary = result.summary
    for tier in ("online", "batch"):
        counted = sum(after[(tier, r)] - before[(tier, r)] for r in ("queue_timeout", "queue_full"))
        figures = summary[tier]
        assert figures["shed"] == counted, (tier, figures, counted)
        assert figures["shed_rate"] == pytest.approx(counted / figures["count"])
        assert figures["completed"] + figures["errors"] + figures["shed"] == figures["count"]
        assert figures["errors"] == 0, result.samples  # shed is not an error
    assert summary["online"]["shed"] >= 10 and summary["batch"]["shed"] >= 5, summary
    assert summary["overall"]["shed"] == summary["online"]["shed"] + summary["batch"]["shed"]
