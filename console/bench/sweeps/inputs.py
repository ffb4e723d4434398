"""Checking what a sweep is created from, beyond its spec: the node and its base versions,
the endpoint the trials' benchmarks go to, the workload and the repeats. Each problem is a
SweepError naming the field, as the API receives it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.bench import services as bench_services
from console.bench.choices import Preset
from console.bench.presets import PRESETS, preset_workload, validate_tier_profiles
from console.bench.sweeps.choices import Objective, SweepKind
from console.bench.sweeps.spec import SweepSpec
from console.fleet.choices import EndpointKind, NodeMode
from console.fleet.models import Endpoint, Node
from loadgen.stats import NO_TIER

MAX_REPEATS = 10
# Runs per trial when none is given: with one run a side a decision against the base cannot
# see run-to-run noise (decisions.py assumes it, and rarely decides).
DEFAULT_REPEATS = 3
ONLINE = "online"


class SweepError(ValueError):
    """Bad input or a refused action; `field` names what to fix. `conflict`: the object's
    state forbids it now (the API answers 409 rather than 400)."""

    def __init__(self, field: str, message: str, *, conflict: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.conflict = conflict


@dataclass(frozen=True)
class Workload:
    preset: str
    workload: dict[str, Any]
    tier_profiles: dict[str, Any]

    @property
    def tiers(self) -> set[str]:
        """The tiers its requests carry (the loadgen's "default" when none)."""
        return set(self.workload.get("tier_mix") or {}) or {NO_TIER}


def lookup(model: type[Any], value: Any, field: str) -> Any:
    """A row given as itself or by id."""
    if isinstance(value, model):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise SweepError(field, "must be an id")
    found = model.objects.filter(pk=value).first()
    if found is None:
        raise SweepError(field, f"no {model._meta.verbose_name} with id {value}")
    return found


def base_versions(node: Node, kind: str) -> tuple[Any, Any]:
    """The node's desired versions of both kinds; the swept kind's must exist."""
    tier_config, launch_profile = node.desired_tier_config, node.desired_launch_profile
    if kind == SweepKind.TIER_CONFIG and tier_config is None:
        raise SweepError("node", f"{node.name} has no tier config version to start from")
    if kind == SweepKind.LAUNCH_PROFILE:
        if launch_profile is None:
            raise SweepError("node", f"{node.name} has no launch profile version to start from")
        if node.mode == NodeMode.ATTACHED:
            raise SweepError("node", f"{node.name} is attached: launch profiles need managed mode")
    return tier_config, launch_profile


def endpoint_of(node: Node, value: Any) -> Endpoint:
    """The endpoint given (it must reach this node), or the node's own gateway endpoint."""
    if value is None:
        found = Endpoint.objects.filter(node=node, kind=EndpointKind.GATEWAY).first()
        if found is None:
            raise SweepError(
                "endpoint", f"{node.name} has no gateway endpoint yet (its agent has not reported)"
            )
        return found
    endpoint: Endpoint = lookup(Endpoint, value, "endpoint")
    if endpoint.node_id != node.pk:
        raise SweepError("endpoint", f"{endpoint.name} does not reach node {node.name}")
    return endpoint


def repeats_of(value: Any) -> int:
    if value is None:
        return DEFAULT_REPEATS
    if isinstance(value, bool) or not isinstance(value, int):
        raise SweepError("repeats", "must be an integer")
    if not 1 <= value <= MAX_REPEATS:
        raise SweepError("repeats", f"must be between 1 and {MAX_REPEATS}")
    return value


def _split(exc: ValueError) -> SweepError:
    field, _, message = str(exc).partition(": ")
    return SweepError(field if message else "tier_profiles", message or str(exc))


def workload_of(data: Mapping[str, Any], endpoint: Endpoint, model: str) -> Workload:
    """A preset (its workload, overridden by `workload`'s fields) or a custom workload,
    checked as a benchmark run's; without a salt, so each run gets a fresh one."""
    preset = data.get("preset") or Preset.CUSTOM
    if preset != Preset.CUSTOM and preset not in PRESETS:
        raise SweepError("preset", f"must be one of custom, {', '.join(PRESETS)}")
    given = data.get("workload")
    if given is not None and not isinstance(given, Mapping):
        raise SweepError("workload", "must be an object")
    profiles_raw = data.get("tier_profiles")
    if preset in PRESETS:
        base, preset_profiles = preset_workload(preset, endpoint.base_url, model)
        workload = {**base, **(given or {})}
        profiles_raw = profiles_raw or preset_profiles
    elif given is None:
        raise SweepError("workload", "required unless a preset is given")
    else:
        workload = dict(given)
    try:
        profiles = validate_tier_profiles(profiles_raw) if profiles_raw else {}
    except ValueError as exc:
        raise _split(exc) from None
    if profiles:
        workload["tier_mix"] = {t: p["weight"] for t, p in profiles.items()}
    workload.pop("salt", None)
    try:
        clean = bench_services.validate_workload(
            {**workload, "base_url": endpoint.base_url, "model": model}
        )
    except bench_services.RunError as exc:
        raise SweepError(exc.field, exc.message) from None
    if not clean.get("salt"):
        clean.pop("salt", None)
    return Workload(str(preset), clean, profiles)


def check_tiers(spec: SweepSpec, workload: Workload) -> None:
    """A cap or objective on a tier the workload never sends could never be met."""
    tiers = workload.tiers
    for tier in spec.constraints.max_ttft_p99_ms:
        if tier not in tiers:
            raise SweepError(
                f"constraints.max_ttft_p99_ms.{tier}",
                f"the workload sends no {tier} requests (its tiers: {', '.join(sorted(tiers))})",
            )
    if spec.objective == Objective.MIN_ONLINE_TTFT_P99 and ONLINE not in tiers:
        raise SweepError(
            "objective", "the workload sends no online requests (give it a tier mix with online)"
        )


def default_max_in_flight(launch_profile: Any) -> int | None:
    """The gateway's default `max_in_flight` under this launch profile (its `max_num_seqs`),
    which tier-config values are checked against; None without a profile or that arg."""
    seqs = (launch_profile.args or {}).get("max_num_seqs") if launch_profile else None
    return seqs if isinstance(seqs, int) else None


def document_of(kind: str, tier_config: Any, launch_profile: Any) -> dict[str, Any]:
    """The swept document of the base: its tier config or its launch args."""
    return dict(tier_config.config if kind == SweepKind.TIER_CONFIG else launch_profile.args)
