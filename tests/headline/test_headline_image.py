"""`manage.py headline` runs from the Docker image's files alone (issue 19, item 5): a folder
holding only what docker/Dockerfile COPYs (its COPY lines parsed, so the test follows the
Dockerfile), Python started with -S and PYTHONPATH set to that folder and the venv's
site-packages (the venv's editable install of the checkout left out), a short simulated
experiment that starts its engines and gateways from there, and its runs in the database."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def copies(dockerfile: Path) -> list[tuple[list[str], PurePosixPath]]:
    """(sources, destination inside the image) of every COPY, relative destinations resolved
    against the WORKDIR in force."""
    workdir = PurePosixPath("/")
    out = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "WORKDIR":
            workdir = workdir / words[1]
        elif words[0] == "COPY":
            args = [w for w in words[1:] if not w.startswith("--")]
            out.append((args[:-1], workdir / args[-1]))
    return out


def image_tree(dockerfile: Path, into: Path) -> Path:
    """Lay the COPYs out under `into` as the image has them; returns the image's /app."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    app = None
    for sources, dest in copies(dockerfile):
        target = into / dest.relative_to("/")
        for source in sources:
            path = ROOT / source
            if path.is_dir():
                shutil.copytree(path, target, ignore=ignore, dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target / path.name)
            if source == "manage.py":
                app = target
    assert app is not None, "the Dockerfile copies no manage.py"
    return app


def test_the_parser_follows_the_dockerfile() -> None:
    found = copies(DOCKERFILE)
    text = DOCKERFILE.read_text()
    assert len(found) == len(re.findall(r"^COPY\s", text, re.MULTILINE)) > 0
    sources = {s for srcs, _ in found for s in srcs}
    assert {"manage.py", "console", "scheduler", "gpu_agent", "loadgen"} <= sources
    assert not {"lab", "tools", "tests"} & sources  # what the test proves it lacks


@pytest.mark.slow
def test_manage_py_headline_runs_and_stores_from_the_image_files(tmp_path: Path) -> None:
    app = image_tree(DOCKERFILE, tmp_path / "image")
    site = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "CELERY"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(app), site]),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        TIERGATE_DATA_DIR=str(tmp_path / "data"),
        PYTHONDONTWRITEBYTECODE="1",
    )

    def python(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", *args], cwd=app, env=env, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip

    where = python("-c", "import console, gpu_agent; print(console.__file__, gpu_agent.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(p.startswith(str(app)) for p in where.stdout.split()), where.stdout
    for absent in ("lab", "tools"):
        assert python("-c", f"import {absent}").returncode != 0, f"{absent} is importable"

    migrate = python("manage.py", "migrate", "--noinput", "-v0")
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    workdir = tmp_path / "hl"
    run = python(
        "manage.py", "headline", "--arms", "ac", "--rate", "10", "--duration", "2",
        "--warmup", "0.5", "--no-search", "--seed", "2", "--workdir", str(workdir),
    )  # fmt: skip
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    assert "stored arm (a) as benchmark run" in run.stdout
    assert "stored arm (c) as benchmark run" in run.stdout

    doc = json.loads((workdir / "headline.json").read_text())
    assert doc["command"].split()[1:3] == ["manage.py", "headline"]
    assert [a["key"] for a in doc["arms"]] == ["a", "c"]
    with sqlite3.connect(tmp_path / "db.sqlite3") as db:
        runs = db.execute("SELECT id, status, label FROM bench_benchmarkrun ORDER BY id").fetchall()
        assert [(status, label.split()[1]) for _, status, label in runs] == [
            ("succeeded", "(a)"),
            ("succeeded", "(c)"),
        ]
        for run_id, _, _ in runs:
            (samples,) = db.execute(
                "SELECT count(*) FROM bench_requestsample WHERE run_id = ?", (run_id,)
            ).fetchone()
            assert samples > 0
