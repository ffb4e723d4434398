"""The Celery app, configured from Django settings (the CELERY_ namespace)."""

from __future__ import annotations

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

# The embedded broker (`filesystem://`) uses our atomic variant of kombu's transport.
TRANSPORT_ALIASES["filesystem"] = "console.core.broker:Transport"

app = Celery("tiergate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
