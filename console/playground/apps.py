from __future__ import annotations

from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "console.playground"
    label = "playground"
    verbose_name = "Playground"
