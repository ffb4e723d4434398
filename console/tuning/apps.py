from __future__ import annotations

from django.apps import AppConfig

DEMO_SEEDER = "console.tuning.demo.seed"


class TuningConfig(AppConfig):
    name = "console.tuning"
    label = "tuning"
    verbose_name = "Tuning"

    def ready(self) -> None:
        from console.core.demo import DEMO_SEEDERS

        # After the fleet's seeder (which inserts itself first): its nodes are set to want v1.
        if DEMO_SEEDER not in DEMO_SEEDERS:
            DEMO_SEEDERS.append(DEMO_SEEDER)
