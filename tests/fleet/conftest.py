"""Fleet fixtures: a node with its plaintext token, tier configs and launch profiles made
through the tuning app's services, a heartbeat body builder, and a local OpenAI-like server."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fleet.fleet_helpers import SEED_TIERS


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """The shared user fixtures set passwords; the default hasher costs ~0.4 s a user here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def node_and_token(db: None) -> tuple[Any, str]:
    from console.fleet import services

    return services.create_node("gpu-a-01", ["h200"], None)


@pytest.fixture
def tier_config(db: None) -> Any:
    from console.tuning.services import create_tier_config

    return create_tier_config(name="seed-000", config=SEED_TIERS, message="seed")


@pytest.fixture
def launch_profile(db: None) -> Any:
    from console.tuning.services import create_launch_profile

    return create_launch_profile(
        name="demo", args={"model": "demo-8b", "max_num_seqs": 64}, message="demo"
    )


@pytest.fixture
def superuser(db: None, django_user_model: Any) -> Any:
    """Django's admin site needs is_staff; the console's admin role alone is not enough."""
    return django_user_model.objects.create_superuser(
        "root", "root@example.com", "tiergate-test-pw-1"
    )
