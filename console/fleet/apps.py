from __future__ import annotations

from django.apps import AppConfig

DEMO_SEEDER = "console.fleet.demo.seed"


class FleetConfig(AppConfig):
    name = "console.fleet"
    label = "fleet"
    verbose_name = "Fleet"

    def ready(self) -> None:
        from console.core.demo import DEMO_SEEDERS
        from console.fleet.api import schema  # noqa: F401  (registers the OpenAPI extension)

        # First: other apps' demo data (the tuning app's desired versions) refers to the nodes.
        if DEMO_SEEDER not in DEMO_SEEDERS:
            DEMO_SEEDERS.insert(0, DEMO_SEEDER)
