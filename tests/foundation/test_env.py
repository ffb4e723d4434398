from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.env import EnvError, env_bool, env_int, env_list, env_secret, env_url

ROOT = Path(__file__).resolve().parents[2]


def test_bool_accepts_the_usual_spellings() -> None:
    assert env_bool("X", False, {"X": "True"}) is True
    assert env_bool("X", True, {"X": "off"}) is False
    assert env_bool("X", True, {}) is True


def test_bool_rejects_anything_else_naming_the_variable() -> None:
    with pytest.raises(EnvError, match="TIERGATE_DEBUG"):
        env_bool("TIERGATE_DEBUG", False, {"TIERGATE_DEBUG": "maybe"})


def test_int_rejects_text_and_values_below_minimum() -> None:
    assert env_int("N", 5, {"N": " 7 "}) == 7
    with pytest.raises(EnvError, match="N: expected an integer"):
        env_int("N", 5, {"N": "seven"})
    with pytest.raises(EnvError, match="N: must be >= 1"):
        env_int("N", 5, {"N": "0"}, minimum=1)


def test_list_splits_and_rejects_empty_items() -> None:
    assert env_list("H", ["a"], {"H": "x.example, y.example"}) == ["x.example", "y.example"]
    with pytest.raises(EnvError, match="H: empty item"):
        env_list("H", [], {"H": "a,,b"})


def test_secret_reads_the_file_variant(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text("s3cret\n")
    assert env_secret("K", {"K_FILE": str(f)}) == "s3cret"
    with pytest.raises(EnvError, match="K and K_FILE are both set"):
        env_secret("K", {"K": "a", "K_FILE": str(f)})
    with pytest.raises(EnvError, match="K_FILE: cannot read"):
        env_secret("K", {"K_FILE": str(tmp_path / "missing")})


def test_url_scheme_is_checked() -> None:
    assert env_url("DATABASE_URL", "sqlite:///x", {"sqlite"}, {}) == "sqlite:///x"
    with pytest.raises(EnvError, match="DATABASE_URL: unsupported URL scheme 'mysql'"):
        env_url("DATABASE_URL", "", {"sqlite", "postgres"}, {"DATABASE_URL": "mysql://x"})


def _check_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TIERGATE_", "DATABASE_URL", "CELERY_"))
    }
    clean.update({"TIERGATE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TIERGATE_DEBUG", "perhaps"),
        ("DATABASE_URL", "oracle://db/x"),
        ("CELERY_BROKER_URL", "carrier-pigeon://coop"),
        ("TIERGATE_FERNET_KEY", "not-a-fernet-key"),
        ("TIERGATE_DB_CONN_MAX_AGE", "-3"),
    ],
)
def test_malformed_values_stop_startup_naming_the_variable(
    tmp_path: Path, name: str, value: str
) -> None:
    result = _check_settings(tmp_path, **{name: value})
    assert result.returncode != 0
    assert name in result.stderr


def test_production_mode_requires_the_secret_key(tmp_path: Path) -> None:
    result = _check_settings(tmp_path, TIERGATE_PRODUCTION="true")
    assert result.returncode != 0
    assert "TIERGATE_SECRET_KEY: required" in result.stderr


def test_demo_mode_generates_secrets_once_into_the_data_dir(tmp_path: Path) -> None:
    assert _check_settings(tmp_path).returncode == 0
    first = (tmp_path / "secret_key").read_text()
    assert _check_settings(tmp_path).returncode == 0
    assert (tmp_path / "secret_key").read_text() == first
    assert (tmp_path / "fernet.key").stat().st_mode & 0o077 == 0
