"""`make demo` installs the project before anything else (`pip install --quiet -e .[dev]`); the
build backend must not print deprecation notices about pyproject.toml on the operator's
terminal there (issue 58: setuptools' `project.license` table warning, repeated per build step).
The project's own pyproject.toml is built in a scratch copy, as pip builds it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_license_is_an_spdx_expression_the_backend_supports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    requires = project["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("setuptools>=") for r in requires), requires
    floor = next(r for r in requires if r.startswith("setuptools"))
    # SPDX strings in project.license need setuptools 77 or later.
    assert int(floor.split(">=")[1].split(".")[0]) >= 77, floor


def test_building_the_project_prints_no_deprecation_notice(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "README.md", tmp_path)
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "__init__.py").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--dry-run", "--quiet", "-e", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output  # setuptools>=77 comes from the package registry
    assert "deprecated" not in output.lower(), output
    assert "project.license" not in output, output
