"""Celery tasks of the core app."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="core.ping", acks_late=False, ignore_result=False)
def ping() -> str:
    """Answered by any live worker; /healthz uses it to tell whether one is running."""
    return "pong"
