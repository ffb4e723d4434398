"""The shipped Prometheus files pass promtool (Debian's prometheus package): the rule files
check, their unit tests (docker/prometheus/tests) pass, and the compose scrape config checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "docker" / "prometheus"
PROMTOOL = "/usr/bin/promtool"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


def test_the_rule_files_check() -> None:
    files = sorted(str(p) for p in (PROMETHEUS / "rules").glob("*.yml"))
    assert len(files) == 2
    result = promtool("check", "rules", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rule_unit_tests_pass() -> None:
    tests = sorted(str(p) for p in (PROMETHEUS / "tests").glob("*.yml"))
    assert tests
    result = promtool("test", "rules", *tests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_compose_scrape_config_checks() -> None:
    # Its rule_files glob names the compose container's mount; the syntax is what is checked.
    result = promtool("check", "config", "--syntax-only", str(PROMETHEUS / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_rule_fails_the_check(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("groups:\n  - name: x\n    rules:\n      - record: a:b\n        expr: sum(\n")
    assert promtool("check", "rules", str(broken)).returncode != 0
