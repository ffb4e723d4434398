"""The root conftest's helpers (its module name is shadowed by this folder's conftest): the
test database's URL for child processes, and sign_in."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def database_url() -> str:
    return str(root_conftest().test_database_url())


def root_conftest() -> Any:
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == ROOT_CONFTEST:
            return module
    raise RuntimeError("the root conftest is not loaded")
