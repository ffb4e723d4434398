"""Who else may change a sweep's node: no one, while the sweep runs.

A sweep owns its node's desired versions from its creation to its end (it sets a version per
trial and puts the base back at the end): a change by hand would be measured as the trial's,
and a rollout would fight the executor over the node. So:
- `active_sweep_of` is one of fleet.desired.HAND_CHANGE_CHECKS (registered in the bench app's
  AppConfig.ready), which hand changes and rollouts ask before touching a node;
- creating a sweep asks the reverse (services.create_sweep: no rollout, no other sweep).
The registration keeps the imports one way (bench -> tuning -> fleet): the rollouts never
import the bench app, they ask the checks registered with the fleet.
"""

from __future__ import annotations

from console.bench.sweeps.choices import ACTIVE
from console.bench.sweeps.models import Sweep
from console.fleet.models import Node


def active_sweep_of(node: Node) -> str | None:
    """Why the node's desired versions may not change now, or None."""
    sweep = Sweep.objects.filter(node=node, status__in=ACTIVE).order_by("pk").first()
    if sweep is None:
        return None
    return f"{node.name} is under {sweep} until it ends: cancel it first"


def register() -> None:
    from console.fleet.desired import HAND_CHANGE_CHECKS

    if active_sweep_of not in HAND_CHANGE_CHECKS:
        HAND_CHANGE_CHECKS.append(active_sweep_of)
