"""The test database's URL for child processes (a Celery worker started by a test), from the
root conftest (whose module name this folder's conftest shadows)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def database_url() -> str:
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == ROOT_CONFTEST:
            return str(module.test_database_url())
    raise RuntimeError("the root conftest is not loaded")
