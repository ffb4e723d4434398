"""Concurrent creates of one name get distinct, consecutive version numbers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from console.audit.models import AuditEvent
from console.tuning import services
from console.tuning.models import TierConfigVersion

WRITERS = 6


@pytest.mark.django_db(transaction=True)
def test_parallel_writers_never_share_a_version_number(
    operator: Any, seed_tiers: dict[str, Any]
) -> None:
    start = threading.Barrier(WRITERS)
    failures: list[BaseException] = []

    def write(index: int) -> None:
        try:
            start.wait()
            services.create_tier_config(
                name="raced", config=seed_tiers, message=f"writer {index}", user=operator
            )
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    versions = sorted(
        TierConfigVersion.objects.filter(name="raced").values_list("version", flat=True)
    )
    assert versions == list(range(1, WRITERS + 1))
    assert AuditEvent.objects.filter(object_type="tuning.tierconfigversion").count() == WRITERS
