"""Celery tasks of the fleet app."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from console.fleet.models import TelemetrySample

log = logging.getLogger(__name__)
PRUNE_BATCH = 20_000


def prune_telemetry(now: datetime | None = None) -> int:
    """Delete samples older than TIERGATE_TELEMETRY_RETENTION_HOURS; returns how many.

    In batches of primary keys, so one run never holds SQLite's write lock for long while
    heartbeats wait behind it."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.TIERGATE_TELEMETRY_RETENTION_HOURS)
    deleted = 0
    while True:
        ids = list(
            TelemetrySample.objects.filter(ts__lt=cutoff).values_list("pk", flat=True)[:PRUNE_BATCH]
        )
        if not ids:
            break
        deleted += TelemetrySample.objects.filter(pk__in=ids).delete()[0]
    if deleted:
        log.info("pruned %d telemetry samples older than %s", deleted, cutoff.isoformat())
    return deleted


@shared_task(name="fleet.prune_telemetry")
def prune_telemetry_task() -> int:
    """Idempotent: running it twice deletes nothing more."""
    return prune_telemetry()
