"""`python -m scheduler validate|diff` run as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.scheduler.sched_helpers import seed_dict


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler", *args], capture_output=True, text=True, timeout=60
    )


def write(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_validate_accepts_the_seed(tmp_path: Path) -> None:
    seed = write(tmp_path, "seed.json", seed_dict())
    other = write(tmp_path, "other.json", seed_dict())
    result = run("validate", seed, other)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [f"{seed}: ok", f"{other}: ok"]


def test_validate_names_each_broken_field(tmp_path: Path) -> None:
    doc = seed_dict()
    doc["scheduler"]["queues"]["batch"].update({"max_batch_size": -4, "priority": 1})
    doc["scheduler"]["adaptive"]["wait_time_reduction_ratio"] = 1.5
    good = write(tmp_path, "good.json", seed_dict())
    bad = write(tmp_path, "bad.json", doc)
    result = run("validate", good, bad)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"{good}: ok"]
    assert result.stderr.splitlines() == [
        f"{bad}: scheduler.queues.batch.max_batch_size: must be > 0",
        f"{bad}: scheduler.queues.batch.priority: must differ from queues.online.priority",
        f"{bad}: scheduler.adaptive.wait_time_reduction_ratio: must be in (0, 1]",
    ]


def test_validate_reports_bad_json_with_line_and_column(tmp_path: Path) -> None:
    bad = write(tmp_path, "broken.json", '{"scheduler": {\n  "queues": }\n')
    result = run("validate", bad)
    assert result.returncode == 1
    assert result.stderr.strip() == f"{bad}: invalid JSON at line 2 column 13: Expecting value"
    missing = run("validate", str(tmp_path / "nope.json"))
    assert missing.returncode == 1 and "nope.json: cannot read" in missing.stderr


def test_diff_of_identical_configs(tmp_path: Path) -> None:
    a = write(tmp_path, "a.json", seed_dict())
    result = run("diff", a, a)
    assert result.returncode == 0 and result.stdout == "no differences\n"


def test_diff_lists_changes(tmp_path: Path) -> None:
    new = seed_dict()
    new["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 5
    new["scheduler"]["adaptive"]["enabled"] = False
    new["scheduler"]["admission"] = {"max_in_flight": 64}
    result = run("diff", write(tmp_path, "a.json", seed_dict()), write(tmp_path, "b.json", new))
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "scheduler.queues.online.max_waiting_time_ms: 10 -> 5",
        "scheduler.adaptive.enabled: true -> false",
        "scheduler.admission.max_in_flight: null -> 64",
    ]


def test_diff_refuses_an_invalid_side(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.json", {"scheduler": {"queues": {}}})
    result = run("diff", write(tmp_path, "a.json", seed_dict()), bad)
    assert result.returncode == 1 and "scheduler.queues: must not be empty" in result.stderr
