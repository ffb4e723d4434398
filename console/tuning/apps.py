from __future__ import annotations

from django.apps import AppConfig

DEMO_SEEDER = "console.tuning.demo.seed"


class TuningConfig(AppConfig):
    name = "console.tuning"
    label = "tuning"
    verbose_name = "Tuning"

    def ready(self) -> None:
        from console.core.demo import DEMO_SEEDERS

        # First: other apps' demo data (nodes' desired versions, rollouts) refers to these.
        if DEMO_SEEDER not in DEMO_SEEDERS:
            DEMO_SEEDERS.insert(0, DEMO_SEEDER)
