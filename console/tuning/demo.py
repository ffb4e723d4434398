"""Demo data: tier config "default" v1 (seed 000) and v2 (a tighter online tier), and launch
profile "demo-8b" v1 for the simulated 8B engine. The fleet's demo nodes (seeded before this)
are set to want v1, so v2 is there to be rolled out (and rolled back). Idempotent: existing
versions are kept, and a node that already wants a version keeps it."""

from __future__ import annotations

import copy
import json
from typing import Any

from console.fleet import services as fleet_services
from console.fleet.demo import DEMO_NODES
from console.fleet.models import Node
from console.tuning import services
from console.tuning.models import LaunchProfileVersion, TierConfigVersion
from scheduler import config_to_dict, default_config

TIER_CONFIG_NAME = "default"
LAUNCH_PROFILE_NAME = "demo-8b"


def tighter_online(config: dict[str, Any]) -> dict[str, Any]:
    """v2: the online tier waits 5 ms, and halving starts at 5 queued requests."""
    variant = copy.deepcopy(config)
    variant["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 5
    variant["scheduler"]["adaptive"]["online_pressure_threshold"] = 5
    return variant


def demo_profile_args() -> dict[str, Any]:
    # The simulator's default preset models Llama-3-8B on one H100 80 GB.
    return {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "served_model_name": "llama-8b",
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.9,
        "max_model_len": 8192,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 16384,
        "scheduling_policy": "priority",
        "enable_prefix_caching": True,
    }


def seed(ctx: Any) -> list[str]:
    admin = getattr(ctx, "admin", None)
    notes: list[str] = []
    if not TierConfigVersion.objects.filter(name=TIER_CONFIG_NAME).exists():
        seed_config = config_to_dict(default_config())
        services.create_tier_config(
            name=TIER_CONFIG_NAME,
            config=seed_config,
            user=admin,
            message="Seed 000: online / batch / offline tiers with adaptive wait-time halving",
        )
        services.create_tier_config(
            name=TIER_CONFIG_NAME,
            config=tighter_online(seed_config),
            user=admin,
            message="Online tier waits 5 ms; adaptive halving from 5 queued requests",
        )
        notes.append(f"tier config {TIER_CONFIG_NAME!r}: v1 (seed 000) and v2")
    if not LaunchProfileVersion.objects.filter(name=LAUNCH_PROFILE_NAME).exists():
        services.create_launch_profile(
            name=LAUNCH_PROFILE_NAME,
            args=demo_profile_args(),
            user=admin,
            message="Simulated 8B: priority scheduling, prefix caching, 64 sequences",
        )
        notes.append(f"launch profile {LAUNCH_PROFILE_NAME!r}: v1")
    notes.extend(point_demo_nodes(admin))
    notes.extend(give_demo_nodes_profiles(admin, ctx))
    return notes


# Each demo node's engine, as a launch profile of its own: two nodes that differ, so comparing
# benchmarks across them shows something. The demo starts each engine from its profile's argv.
DEMO_NODE_PROFILES = {
    "demo-node-1": (
        "demo-priority",
        {
            "model": "demo-8b",
            "max_num_seqs": 64,
            "scheduling_policy": "priority",
            "enable_prefix_caching": True,
        },
    ),
    "demo-node-2": (
        "demo-fcfs",
        {
            "model": "demo-8b",
            "max_num_seqs": 128,
            "scheduling_policy": "fcfs",
            "enable_prefix_caching": False,
        },
    ),
}


def give_demo_nodes_profiles(admin: Any, ctx: Any) -> list[str]:
    """Each demo node wants its own profile (created once) unless it wants another already;
    the node's engine command line is written to demo-engines.json for the launcher, so the
    agent finds it runs what is desired and applies it without a restart."""
    from console.core.demo import DEMO_ENGINES_FILE

    notes: list[str] = []
    engines: dict[str, list[str]] = {}
    for node in Node.objects.filter(name__in=list(DEMO_NODE_PROFILES)):
        name, args = DEMO_NODE_PROFILES[node.name]
        version = LaunchProfileVersion.objects.filter(name=name).order_by("-version").first()
        if version is None:
            version = services.create_launch_profile(
                name=name, args=args, user=admin, message=f"the engine {node.name} runs"
            )
        if node.desired_launch_profile_id is None:
            fleet_services.set_desired([node], launch_profile=version, user=admin, reason="demo")
            notes.append(f"fleet: {node.name} wants launch profile {name!r} v{version.version}")
        wanted = node.desired_launch_profile or version
        engines[node.name] = wanted.argv()
    data_dir = getattr(ctx, "data_dir", None)
    if data_dir is not None:
        path = data_dir / DEMO_ENGINES_FILE
        path.write_text(json.dumps(engines, indent=2) + "\n", encoding="utf-8")
    return notes


def point_demo_nodes(admin: Any) -> list[str]:
    """Demo nodes that want no tier config yet are set to want "default" v1."""
    first = TierConfigVersion.objects.filter(name=TIER_CONFIG_NAME).order_by("version").first()
    if first is None:
        return []
    nodes = Node.objects.filter(
        name__in=[name for name, _, _ in DEMO_NODES], desired_tier_config=None
    )
    changed = fleet_services.set_desired(list(nodes), tier_config=first, user=admin, reason="demo")
    if not changed:
        return []
    names = ", ".join(n.name for n in changed)
    return [f"fleet: {names} want tier config {TIER_CONFIG_NAME!r} v{first.version}"]
