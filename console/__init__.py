"""The Tiergate console: Django project, REST API and Celery workers.

Importing the Celery app here makes `@shared_task` bind to it in every process.
Loadgen (`console.bench.loadgen`) is importable without Django; the import below is lazy in
effect because `console.celery` only imports Celery, never Django models.
"""

from __future__ import annotations

from console.celery import app as celery_app

__all__ = ["celery_app"]
