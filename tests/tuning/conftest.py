"""Fixtures of the tuning tests: the seed's tier JSON, the broken one, and a valid profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def seed_tiers() -> dict[str, Any]:
    """Seed 000's tier config, as the conformance check posts it."""
    return json.loads((DATA / "seed_tiers.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture
def bad_tiers() -> dict[str, Any]:
    """Same priority twice, a negative batch size, a reduction ratio above 1."""
    return json.loads((DATA / "bad_tiers.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture
def profile_args() -> dict[str, Any]:
    return {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "served_model_name": "llama-8b",
        "max_model_len": 8192,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 16384,
        "scheduling_policy": "priority",
        "enable_prefix_caching": True,
    }


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # The role fixtures create users with passwords; PBKDF2's deliberate slowness would make
    # user setup the bulk of these tests' time. The login path itself is not under test here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
