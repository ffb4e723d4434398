"""Launch profiles against a real vLLM's own argument parser: the agent's probe reads vLLM
0.32's parser (nothing hand-listed), and the console's rebuilt parser refuses exactly what
vLLM refuses, in vLLM's words."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from console.tuning.engine_check import refusal
from gpu_agent.engine_probe import __file__ as PROBE_FILE
from gpu_agent.engine_report import probe_engine
from tests.vllm.vllm_helpers import TIMEOUT
from tools import vllm_env

pytestmark = [pytest.mark.vllm, TIMEOUT]

ARGVS = [
    ["m", "--max-num-seqs", "8", "--scheduling-policy", "priority"],
    ["m", "--turbo-mode"],
    ["m", "--scheduler-policy", "priority"],  # the seeds' README: not a vLLM flag
    ["m", "--disable-log-requests"],  # gone from recent vLLM
    ["m", "--max-num-seqs", "eight"],
    ["m", "--scheduling-policy", "lifo"],
    ["m", "--gpu-memory-utilization", "x"],
    ["m", "--max-num-seqs"],
    ["m", "--enable-prefix-caching=yes"],
    ["m", "--no-enable-prefix-caching", "--max_num_seqs", "4"],
    ["m", "--dtype", "float64"],
    ["m", "-tp", "2", "--max-model-len", "1k"],
    ["m", "--max-num-s", "4"],
]
# Runs with vLLM's Python: the probe's own check, for every argv, in one import of vLLM.
CHECK_ALL = """
import json, runpy, sys
sys.path.pop(0)
probe = runpy.run_path(sys.argv[1])
print(json.dumps([probe["check"]("vllm", a) for a in json.loads(sys.argv[2])]))
"""


@pytest.fixture(scope="module")
def vllm_report() -> dict[str, Any]:
    vllm_env.require()
    report = asyncio.run(probe_engine(["vllm", "serve", "m"], vllm_env.engine_env()))
    assert report is not None
    return report


@pytest.fixture(scope="module")
def vllm_verdicts() -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(vllm_env.require()), "-c", CHECK_ALL, PROBE_FILE, json.dumps(ARGVS)],
        capture_output=True,
        text=True,
        timeout=600,
        env=vllm_env.engine_env(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    verdicts: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return verdicts


def test_the_probe_reads_vllm_own_parser(vllm_report: dict[str, Any]) -> None:
    assert "error" not in vllm_report, vllm_report.get("error")
    assert vllm_report["engine"] == "vllm"
    assert vllm_report["version"] == vllm_env.VLLM_VERSION
    assert vllm_report["python"] == str(vllm_env.python())
    options = {f: o for o in vllm_report["options"] for f in o["flags"]}
    assert len(options) > 200  # vLLM's whole parser, not a hand-made subset
    assert options["--max-num-seqs"]["type"] == "int"
    assert options["--scheduling-policy"]["choices"] == ["fcfs", "priority"]
    assert options["--enable-prefix-caching"]["kind"] == "bool"
    assert "--scheduler-policy" not in options and "--disable-log-requests" not in options


@pytest.mark.parametrize("index", range(len(ARGVS)), ids=lambda i: " ".join(ARGVS[i][1:]))
def test_the_console_refuses_what_vllm_refuses_in_its_words(
    index: int, vllm_report: dict[str, Any], vllm_verdicts: list[dict[str, Any]]
) -> None:
    assert refusal(vllm_report, ["vllm", "serve", *ARGVS[index]]) == vllm_verdicts[index]["error"]
