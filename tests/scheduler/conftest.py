from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.sched_helpers import seed_dict


@pytest.fixture
def seed() -> dict[str, Any]:
    return seed_dict()
