"""Reading a node's desired and applied versions: the one place the fleet reads tuning's data.

A node points at tier config and launch profile versions (the tuning app's models) through the
foreign keys on `Node`, declared by app label. The fleet reads those versions only here, and
only through the node's relations, so no fleet module imports the tuning app: the dependency
goes one way, tuning (its rollouts) -> fleet.
"""

from __future__ import annotations

import logging
from typing import Any

from console.fleet.models import Node
from scheduler import ConfigError, default_config, parse_config, without_removed

log = logging.getLogger(__name__)


def version_model(field: str) -> Any:
    """The model a node's version field points at (e.g. `applied_tier_config`)."""
    return Node._meta.get_field(field).related_model


def known_version(field: str, claimed: int | None, stored: int | None) -> int | None:
    """The version id to store in `field`: an id the console does not know (a version deleted,
    or an agent pointed at another console) is stored as None rather than breaking the beat."""
    if claimed is None or claimed == stored:
        return claimed
    return claimed if version_model(field).objects.filter(pk=claimed).exists() else None


def launch_argv(version: Any) -> list[str] | None:
    """The `vllm serve` argv of a stored profile version, as every page renders it (types only,
    see LaunchProfileVersion.launch_args); None (and a log line) if even that fails, so one bad
    profile cannot turn every beat of its nodes into a 500."""
    try:
        argv: list[str] = version.argv()
    except ValueError as exc:
        log.warning("launch profile %s v%s does not render: %s", version.name, version.version, exc)
        return None
    return argv


def desired_reply(
    node: Node, applied_tier: int | None, applied_profile: int | None
) -> dict[str, Any]:
    """`desired` of a heartbeat reply: `{"id"}` alone when the agent already runs it, else the
    content."""
    tier: dict[str, Any] | None = None
    if node.desired_tier_config_id is not None:
        tier = {"id": node.desired_tier_config_id}
        if node.desired_tier_config_id != applied_tier and node.desired_tier_config is not None:
            tier_version = node.desired_tier_config
            tier.update(name=tier_version.name, config=tier_version.config)
    profile: dict[str, Any] | None = None
    if node.desired_launch_profile_id is not None:
        profile = {"id": node.desired_launch_profile_id}
        # The relation is read (one query) only on the beat that must carry the content.
        if node.desired_launch_profile_id != applied_profile:
            profile_version = node.desired_launch_profile
            if profile_version is not None:
                argv = launch_argv(profile_version)
                profile.update(name=profile_version.name, args=profile_version.args, argv=argv)
    return {"tier_config": tier, "launch_profile": profile}


def desired_tier_names() -> set[str]:
    """The tier names of the seed's config and of every tier config some node should run."""
    names = set(default_config().scheduler.queues)
    rows = Node.objects.exclude(desired_tier_config=None).values_list(
        "desired_tier_config", "desired_tier_config__config"
    )
    for config in dict(rows).values():  # one parse per version, however many nodes want it
        try:
            names.update(parse_config(without_removed(config)[0]).scheduler.queues)
        except ConfigError:  # stored under an older schema: its tiers are not offered
            continue
    return names
