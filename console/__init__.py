"""The Tiergate console: Django project, REST API and Celery workers.

The Celery app lives in console.celery; `celery -A console` finds it there, and the core app
imports it when Django starts (CoreConfig.ready), so `@shared_task` binds to it in every
process. Nothing is imported here: `loadgen` must stay importable without
Django or Celery.
"""
