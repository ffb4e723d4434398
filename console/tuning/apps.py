from __future__ import annotations

from django.apps import AppConfig


class TuningConfig(AppConfig):
    name = "console.tuning"
    label = "tuning"
    verbose_name = "Tuning"
