"""Seed 000's tier config, verbatim, as the tests use it: read from the one copy of the file
(tests/tuning/data/seed_tiers.json; docs/architecture.md#tier-config)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

SEED_FILE = Path(__file__).resolve().parent / "tuning" / "data" / "seed_tiers.json"
SEED_TIERS: dict[str, Any] = json.loads(SEED_FILE.read_text(encoding="utf-8"))


def seed_tiers(**admission: Any) -> dict[str, Any]:
    """A fresh copy, with `admission` fields added when given."""
    config = copy.deepcopy(SEED_TIERS)
    if admission:
        config["scheduler"]["admission"] = admission
    return config
