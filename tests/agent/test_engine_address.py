"""Managed mode: the engine's --host/--port are the node's, whichever way a command line
arrives (a rolled-out profile, or the saved state after the agent restarts)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from gpu_agent.reconciler import Reconciler
from gpu_agent.state import StateFile
from gpu_agent.supervisor import EngineSupervisor

NODE = ["vllm", "serve", "demo", "--port", "8101", "--max-num-seqs", "8"]
PROFILE = ["vllm", "serve", "demo", "--port", "8000", "--max-num-seqs", "16"]


def test_a_command_line_set_on_the_supervisor_keeps_the_nodes_port() -> None:
    supervisor = EngineSupervisor(NODE, simulate=True)
    assert supervisor.engine_url == "http://127.0.0.1:8101"
    supervisor.argv = PROFILE
    assert supervisor.engine_url == "http://127.0.0.1:8101"
    assert supervisor.argv.count("--port") == 1 and supervisor.args["max_num_seqs"] == 16


def test_a_restarted_agent_restores_the_profile_on_the_nodes_port(tmp_path: Path) -> None:
    saved = {"launch_profile": {"id": 7, "name": "wider", "argv": PROFILE, "args": {}}}
    (tmp_path / "state.json").write_text(json.dumps(saved))
    supervisor = EngineSupervisor(NODE, simulate=True)
    agent = SimpleNamespace(
        supervisor=supervisor, applied={"launch_profile": None}, follow_engine_limits=lambda: None
    )
    Reconciler(agent, "http://console", "token", StateFile(tmp_path)).restore()  # type: ignore[arg-type]
    assert agent.applied["launch_profile"] == 7
    assert supervisor.args["max_num_seqs"] == 16
    assert supervisor.engine_url == "http://127.0.0.1:8101"


def test_a_desired_profile_without_a_command_line_is_reported(tmp_path: Path) -> None:
    supervisor = EngineSupervisor(NODE, simulate=True)
    agent = SimpleNamespace(
        supervisor=supervisor, applied={"launch_profile": None}, desired_seen={}, apply_errors={}
    )
    reconciler = Reconciler(agent, "http://console", "token", StateFile(tmp_path))  # type: ignore[arg-type]
    reconciler._apply_launch_profile({"id": 3, "name": "p", "args": {}, "argv": None})
    assert agent.apply_errors["launch_profile"]["version"] == 3
    assert "no engine command line" in agent.apply_errors["launch_profile"]["error"]
    assert supervisor.argv == NODE  # nothing started


def test_the_default_cap_on_requests_in_flight_follows_the_engines_max_num_seqs() -> None:
    from gpu_agent.agent import Agent
    from gpu_agent.config import parse_args
    from scheduler import default_config

    options = parse_args(
        [
            "--engine-cmd",
            " ".join(NODE),
            "--listen",
            "127.0.0.1:1",
            "--tier-config",
            "x",
            "--keys",
            "y",
        ]
    )
    supervisor = EngineSupervisor(NODE, simulate=True)
    agent = Agent(options, default_config(), [], supervisor=supervisor)
    assert agent.driver.dispatcher.max_in_flight == 8  # the seed config sets no cap of its own
    supervisor.argv = PROFILE
    agent.follow_engine_limits()
    assert agent.driver.dispatcher.max_in_flight == 16


def test_a_refused_priority_is_forgotten_when_the_engine_comes_back_up() -> None:
    from gpu_agent.agent import Agent
    from gpu_agent.config import parse_args
    from scheduler import default_config

    options = parse_args(
        [
            "--engine-url",
            "http://127.0.0.1:1",
            "--listen",
            "127.0.0.1:1",
            "--tier-config",
            "x",
            "--keys",
            "y",
        ]
    )
    agent = Agent(options, default_config(), [])  # pass_priority is on by default
    assert agent.pass_priority
    agent.engine_refuses_priority = True  # what the gateway does on vLLM's refusal
    assert not agent.pass_priority and agent.status()["engine"]["refuses_priority"]
    agent.telemetry.engine_ups += 1  # the engine went down and came back (maybe with priority)
    assert agent.pass_priority and not agent.status()["engine"]["refuses_priority"]
