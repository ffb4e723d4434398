from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docker_files_pass_the_static_check() -> None:
    result = subprocess.run(
        [sys.executable, "docker/check.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
    assert "docker/: ok" in result.stdout
