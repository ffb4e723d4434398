"""The Celery app, configured from Django settings (the CELERY_ namespace)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("tiergate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
