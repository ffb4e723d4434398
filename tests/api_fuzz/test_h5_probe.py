from __future__ import annotations
import os, subprocess, sys, time
from pathlib import Path
from typing import Any
from console.accounts.services import create_token
from tests.api_fuzz.test_no_server_error import _seed, _config, HOOKS, SEED, MAX_EXAMPLES
import pytest

@pytest.mark.timeout(1500)
def test_probe(live_server: Any, admin_user: Any, tmp_path: Path) -> None:
    ids, beat_token = _seed(admin_user)
    own, token_key = create_token(admin_user, "schemathesis")
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(ids, beat_token))
    extra = os.environ.get("H5_EXTRA", "").split()
    command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color", "run",
        f"{live_server.url}/api/v1/schema/", "--checks", "not_a_server_error", "--phases", os.environ.get("H5_PHASES", "coverage,fuzzing"),
        "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED), "--workers", "1", "--request-timeout", "30",
        "--header", f"Authorization: Bearer {token_key}", "--report", "har", "--report-har-path", "/tmp/h5/fuzz.har", *extra]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    t = time.monotonic()
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200, check=False)
    Path("/tmp/h5/fuzz-out.txt").write_text(f"wall {time.monotonic()-t}\n" + result.stdout + result.stderr)
