"""`manage.py demo` keeps its terminal quiet: processes log to files, the sign-in comes last,
and a process that dies shows the tail of its own log."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from console.core.demo import ProcessSpec
from console.core.management.commands.demo import Command

CHATTY = (
    "import sys, time\nfor i in range(200): print('GET /heartbeat 200', i)\nsys.stdout.flush()\n"
)


def test_output_goes_to_log_files_and_the_login_is_last(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    command = Command(stdout=out, stderr=err)
    specs = [
        ProcessSpec("agent node-1", [sys.executable, "-c", CHATTY + "time.sleep(2)"]),
        ProcessSpec("web", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]),
    ]
    login = ["Tiergate demo: http://127.0.0.1:1/", "  sign in as: admin / pw"]
    command._run(specs, login, tmp_path / "logs")
    shown = out.getvalue()
    assert "GET /heartbeat" not in shown and "HTTP Request" not in shown
    lines = [line for line in shown.splitlines() if line.strip()]
    up = next(i for i, line in enumerate(lines) if line.startswith("All processes up"))
    assert lines[up + 1 : up + 3] == login
    assert str(tmp_path / "logs") in lines[up]
    assert "web exited with code 3" in err.getvalue() and "| boom" in err.getvalue()
    chatty_log = (tmp_path / "logs" / "agent-node-1.log").read_text()
    assert chatty_log.count("GET /heartbeat 200") == 200


def test_verbose_leaves_output_in_the_terminal(tmp_path: Path, capfd: object) -> None:
    out = io.StringIO()
    command = Command(stdout=out, stderr=io.StringIO())
    spec = ProcessSpec("web", [sys.executable, "-c", "print('hello from web')"])
    command._run([spec], ["Tiergate demo: x", "  sign in as: admin / pw"], None)
    assert "hello from web" in capfd.readouterr().out  # type: ignore[attr-defined]
    assert not (tmp_path / "logs").exists()
