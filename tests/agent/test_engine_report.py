"""The engine report: a managed agent reads what its engine accepts from the engine's own
parser (here the simulator's, which takes vLLM's flags; tests/vllm does it with vLLM) and
sends it in its heartbeat until the console echoes the report's digest."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from gpu_agent.engine_probe import check, describe
from gpu_agent.engine_report import interpreter_of
from gpu_agent.sim.testing import free_port
from tests.agent.agent_helpers import NODE_TOKEN, FakeConsole, start_agent


def test_the_python_of_an_engine_command_is_found() -> None:
    sim = [sys.executable, "-m", "gpu_agent.sim", "serve", "demo"]
    assert interpreter_of(sim) == (sys.executable, "sim")
    assert interpreter_of([sys.executable, "-m", "vllm.entrypoints.openai.api_server"]) == (
        sys.executable,
        "vllm",
    )
    # A console script (`vllm`): the interpreter of its first line.
    ruff = Path(sys.executable).with_name("ruff")
    pytest_script = Path(sys.executable).with_name("pytest")
    assert interpreter_of([str(pytest_script)]) == (
        pytest_script.read_text().splitlines()[0][2:].strip(),
        "vllm",
    )
    assert interpreter_of([str(ruff)]) is None  # a binary: no Python to ask
    assert interpreter_of(["no-such-engine-command"]) is None


def test_the_probe_describes_the_parser_and_quotes_its_errors() -> None:
    report = describe("sim")
    by_dest = {o["dest"]: o for o in report["options"]}
    assert by_dest["max_num_seqs"] == {
        "flags": ["--max-num-seqs"],
        "dest": "max_num_seqs",
        "kind": "store",
        "nargs": None,
        "type": "int",
        "choices": None,
    }
    assert by_dest["enable_prefix_caching"]["kind"] == "bool"
    assert by_dest["scheduling_policy"]["choices"] == ["fcfs", "priority"]
    assert by_dest["model"]["kind"] == "positional"
    assert check("sim", ["m", "--max-num-seqs", "8"]) == {"ok": True, "error": None}
    assert check("sim", ["m", "--turbo-mode"])["error"] == "unrecognized arguments: --turbo-mode"


async def test_a_managed_agent_reports_its_engine_until_the_console_holds_it(
    console: FakeConsole, tmp_path: Path
) -> None:
    port = free_port()
    command = f"vllm serve demo --port {port} --sim-preset tiny-test"
    args = [
        "--engine-cmd", command,
        "--simulate",
        "--console", console.url,
        "--node-token", NODE_TOKEN,
        "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    with await asyncio.to_thread(start_agent, args, tmp_path / "agent.log"):
        beat = await console.wait_beat(lambda b: "report" in b["engine"], 30, "an engine report")
        report = beat["engine"]["report"]
        assert report["engine"] == "sim" and report["version"].startswith("tiergate-sim")
        assert report["python"] == sys.executable
        assert "--max-num-seqs" in {f for o in report["options"] for f in o["flags"]}
        assert beat["engine"]["report_digest"] == report["digest"]
        assert beat["engine"]["version"] == report["version"]
        # Once the console says it holds this report, beats carry only its digest.
        console.engine_report_digest = report["digest"]
        await console.wait_beat(lambda b: "report" not in b["engine"], 10, "a beat without it")
        later = await console.wait_beat(lambda b: True, 10, "another beat")
        assert "report" not in later["engine"]
        assert later["engine"]["report_digest"] == report["digest"]
