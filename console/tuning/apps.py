from __future__ import annotations

from django.apps import AppConfig

DEMO_SEEDER = "console.tuning.demo.seed"


class TuningConfig(AppConfig):
    name = "console.tuning"
    label = "tuning"
    verbose_name = "Tuning"

    def ready(self) -> None:
        from console.core.demo import DEMO_SEEDERS
        from console.fleet.desired import HAND_CHANGE_CHECKS
        from console.tuning.rollouts.services import unfinished_rollout_of

        if unfinished_rollout_of not in HAND_CHANGE_CHECKS:
            HAND_CHANGE_CHECKS.append(unfinished_rollout_of)
        # After the fleet's seeder (which inserts itself first): its nodes are set to want v1.
        if DEMO_SEEDER not in DEMO_SEEDERS:
            DEMO_SEEDERS.append(DEMO_SEEDER)
