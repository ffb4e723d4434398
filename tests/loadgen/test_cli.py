"""`python -m console.bench.loadgen` (docs/architecture.md#stable-interfaces) and
`python -m loadgen`, as operators and CI run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def loadgen(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.bench.loadgen", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_prints_a_table_and_writes_json(refserver: Any, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    base = refserver.base_url.removesuffix("/v1")  # without /v1 works too
    proc = loadgen(
        "--base-url",
        base,
        "--model",
        "m",
        "--concurrency",
        "4",
        "--requests",
        "12",
        "--prompt-tokens",
        "64",
        "--max-tokens",
        "8",
        "--api-key",
        "sk-test-1234",
        "--tier-mix",
        "online=0.7,batch=0.2,offline=0.1",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "TTFT p50/p90/p99 ms" in proc.stdout
    assert "overall" in proc.stdout
    assert "token times from the kernel's receive stamps" in proc.stdout
    data = json.loads(out.read_text())
    text = json.dumps(data).lower()
    for key in ("ttft", "tpot", "itl", "p99", "throughput"):
        assert key in text
    assert "sk-test-1234" not in text
    assert data["summary"]["overall"]["count"] == 12
    assert len(data["samples"]) == 12
    assert data["samples"][0]["itl_raw"] is None
    assert isinstance(data["validity"]["flags"], list)
    assert data["validity"]["client_cpu_ratio"] > 0


def test_it_exits_nonzero_when_nothing_succeeds() -> None:
    proc = loadgen("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--requests", "2")
    assert proc.returncode == 1
    assert "first error" in proc.stdout


def test_bad_options_name_the_field(tmp_path: Path) -> None:
    proc = loadgen("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--tier-mix", "online")
    assert proc.returncode == 2
    assert "tier_mix" in proc.stderr
    # Each refused before any request is sent: a usage error (2), naming what is wrong.
    base = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    cases = [
        (["--tier-priority", "online=abc"], "tier_priority.online: must be an integer"),
        (["--tier-priority", "online=1.7"], "tier_priority.online: must be an integer"),
        (["--prompts-file", str(tmp_path / "missing.jsonl")], "prompts_file: cannot read"),
        (["--json", str(tmp_path / "no-such-dir" / "out.json")], "--json: cannot write"),
    ]
    for extra, message in cases:
        proc = loadgen(*base, *extra)
        assert proc.returncode == 2 and message in proc.stderr, (extra, proc.stderr)
        assert "first error" not in proc.stdout


def test_the_top_level_package_runs_the_same_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--base-url" in proc.stdout and "--tier-mix" in proc.stdout
