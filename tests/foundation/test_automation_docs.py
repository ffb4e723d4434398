"""The snippets of docs/automation.md work as printed, against a real gateway in front of the
simulator (only the address, key and model are swapped for the test's)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_agent.sim.testing import run_sim_process
from gpu_agent.testing import start_agent_process
from scheduler import config_to_dict, default_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "automation.md"
KEY = "tgk_docs_snippets_online_batch_0123456789abcdef01234567"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("docs")
    keys = [{"name": "docs", "key": KEY, "tiers": ["online", "batch"], "default_tier": "online"}]
    (tmp / "keys.json").write_text(json.dumps(keys))
    (tmp / "tiers.json").write_text(json.dumps(config_to_dict(default_config())))
    with run_sim_process("demo-8b") as sim:
        args = ["--engine-url", sim, "--keys", str(tmp / "keys.json")]
        args += ["--tier-config", str(tmp / "tiers.json")]
        with start_agent_process(args, tmp / "agent.log") as agent:
            yield agent.url


def localise(snippet: str, gateway: str) -> str:
    return snippet.replace("http://127.0.0.1:9101", gateway).replace("tgk_...", KEY)


def test_the_openai_client_snippet_runs(gateway: str) -> None:
    (python,) = blocks("python")
    proc = subprocess.run(
        [sys.executable, "-c", localise(python, gateway)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_the_curl_snippet_streams(gateway: str) -> None:
    curl = next(b for b in blocks("sh") if "9101" in b)
    proc = subprocess.run(
        ["bash", "-c", localise(curl, gateway)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("data: [DONE]")
    assert '"delta"' in proc.stdout
