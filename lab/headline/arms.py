"""The headline experiment's arms beyond the product's (a)-(e) (console/bench/headline/
catalog.py): what issue 16's admission arms, the reserves, the streams in fewer pieces, the
relay floor, the A/A check and the revision check run. `python -m lab.headline --arms ...`
names them; lab/NOTES.md tells what they were for and what they found.

`LabArm` is the product's Arm with the fronts and clients only experiments use: a reserve of
the engine's sequences (its `--max-num-seqs`, read from the engine's flags), more of the
agent's flags, the gateway of another revision, the bare relay, and vLLM's `stream_interval`
asked for by the client itself.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.bench.headline.catalog import Arm, standard_arms
from console.bench.headline.procs import ROOT
from console.bench.headline.workload import SEED_TIER_CONFIG, with_admission
from lab.headline.procs import run_gateway, run_relay
from loadgen import WorkloadSpec
from scheduler import parse_config
from scheduler.config import DEFAULT_MAX_IN_FLIGHT


def lower_tier_fields(value: int) -> dict[str, int]:
    """`value` for each of the seed's tiers but the most urgent, as a client sends per tier."""
    return dict.fromkeys(parse_config(SEED_TIER_CONFIG).tiers_by_urgency()[1:], value)


def engine_sequences(flags: list[str]) -> int:
    """The gateway's default `max_in_flight` for an engine started with `flags`, by the agent's
    rule (docs/admission.md): its `--max-num-seqs`, else DEFAULT_MAX_IN_FLIGHT."""
    for i, flag in enumerate(flags[:-1]):
        if flag == "--max-num-seqs":
            return int(flags[i + 1])
    return DEFAULT_MAX_IN_FLIGHT


def with_queue(config: dict[str, Any], queue: str, **fields: Any) -> dict[str, Any]:
    """A copy of `config` with these fields set on one queue."""
    out = copy.deepcopy(config)
    out["scheduler"]["queues"][queue].update(fields)
    return out


def with_lower_tiers(config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A copy of `config` with these fields set on every tier but the most urgent (a lower
    tier's `stream_interval_tokens`)."""
    for name in parse_config(config).tiers_by_urgency()[1:]:  # the scheduler's own order
        config = with_queue(config, name, **fields)
    return config


@dataclass(frozen=True)
class LabArm(Arm):
    # >0: the client asks vLLM itself for the tiers but online's streams this many tokens a
    # piece (the body's `stream_interval`), as a gateway arm's `stream_interval_tokens` does.
    send_interval: int = 0
    relay: bool = False  # through the bare relay (lab/relay_floor.py), no gateway
    at_rev: bool = False  # the gateway from `source`, another revision's packages
    source: Path | None = None  # set by lab.headline from --gateway-rev (procs.gateway_source)
    # >0: the gateway's max_in_flight is the engine's --max-num-seqs (as the agent sets it from
    # a launch profile) and its last `reserve_sequences` are `reserved_slots`.
    reserve_sequences: int = 0
    reserve_follows_arrivals: bool = False  # that reserve stands one slot per recent arrival
    gateway_flags: tuple[str, ...] = ()  # more of the agent's command-line flags

    def gateway_config(self, flags: list[str]) -> dict[str, Any] | None:
        if self.tier_config is None or not self.reserve_sequences:
            return self.tier_config
        extra = {"reserve_follows_arrivals": True} if self.reserve_follows_arrivals else {}
        return with_admission(
            self.tier_config,
            reserved_slots=self.reserve_sequences,
            max_in_flight=engine_sequences(flags),
            **extra,
        )

    def front(
        self, engine_url: str, flags: list[str], workdir: Path
    ) -> AbstractContextManager[str]:
        config = self.gateway_config(flags)
        if config is not None:
            if self.at_rev and self.source is None:
                raise ValueError(f"arm ({self.key}): needs a gateway revision (--gateway-rev)")
            return run_gateway(
                engine_url, config, workdir, self.name,
                flags=self.gateway_flags, source=self.source or ROOT,
            )  # fmt: skip
        if self.relay:
            return run_relay(engine_url, workdir, self.name)
        return contextlib.nullcontext(engine_url)

    def spec(self, base_url: str, **shared: Any) -> WorkloadSpec:
        spec = super().spec(base_url, **shared)
        if not self.send_interval:
            return spec
        return dataclasses.replace(spec, tier_stream_interval=lower_tier_fields(self.send_interval))

    def record(self) -> dict[str, Any]:
        return {
            **super().record(),
            "client_stream_interval": self.send_interval or None,
            "via_relay": self.relay,
            "gateway_at_rev": self.at_rev,
        }


def lab_arms() -> list[Arm]:
    """The product's (a)-(d), then the lab's: issue 16's admission arms and the checks (i),
    (p), (r); arm (e) comes from the search (console/bench/headline/search.py)."""
    return [*standard_arms(), *extra_arms()]


def extra_arms() -> list[LabArm]:
    return [
        # Issue 16: the starvation bound raised so that offline gets its arrival share.
        LabArm("f", "gateway-share-priority",
            "gateway (seed 000 tiers, admission.min_share 0.1), engine priority", "priority",
            with_admission(SEED_TIER_CONFIG, min_share=0.1)),
        # Issue 16: the age bound on offline (promoted one tier up after 1 s).
        LabArm("g", "gateway-age-priority",
            "gateway (seed 000 tiers, offline promote_after_ms 1000), engine priority",
            "priority", with_queue(SEED_TIER_CONFIG, "offline", promote_after_ms=1000)),
        # Issue 16: (d) without the recovery reserve, to pair with (d) in one run.
        LabArm("h", "gateway-noreserve-priority",
            "gateway (seed 000 tiers, admission.recovery_reserve 0), engine priority",
            "priority", with_admission(SEED_TIER_CONFIG, recovery_reserve=0)),
        # Issue 16: (d) without the starvation bound (strict priority, as the engine alone):
        # what serving the lower tiers their share costs online, paired with (d) in one run.
        LabArm("s", "gateway-noshare-priority",
            "gateway (seed 000 tiers, admission.min_share 0), engine priority", "priority",
            with_admission(SEED_TIER_CONFIG, min_share=0)),
        # Issue 16: a standing reserve. Against a priority engine an urgent request still
        # waits for a running sequence to end (neither vLLM nor the simulator preempts for
        # one); (k) keeps one of the engine's sequences from the less urgent tiers at all times.
        LabArm("k", "gateway-reserve1-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 1), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=1),
        # (k) with a larger reserve: in a saturated round the online P99 is one burst of online
        # arrivals waiting for running sequences to end, and how long depends on how many
        # long lower-tier sequences hold the engine then. (m) keeps 6 of vLLM's 16 from batch
        # and offline.
        LabArm("m", "gateway-reserve6-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=6),
        # (m) with half its reserve: on shared cores (m) cut online TTFT P99 but the engine ran
        # about 10.5 sequences and throughput fell to x0.86; (n) asks where between (k) and
        # (m) the balance lies.
        LabArm("n", "gateway-reserve3-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 3), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=3),
        # (m) whose reserve follows online's arrivals (one slot per online request of the last
        # 2 s): the same reserve while online arrives, every sequence for batch and offline
        # when it does not (the drain after the window, a lull).
        LabArm("q", "gateway-reserve6follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=6, reserve_follows_arrivals=True),
        # (q) with half its reserve: whether 3 keeps most of (q)'s gain for less.
        LabArm("w", "gateway-reserve3follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 3 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=3, reserve_follows_arrivals=True),
        # (w) with a third of its reserve, between the seed's config (d) and (w).
        LabArm("y", "gateway-reserve1follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 1 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=1, reserve_follows_arrivals=True),
        # (w) with the agent leaving vLLM's helpers (API server, engine-core process) where
        # they are, free to run on its OpenMP core: the agent's default moves them beside
        # itself (--fence-engine-helpers).
        LabArm("x", "gateway-reserve3follow-nofence-priority",
            "gateway as (w), vLLM's helpers left where they are (--no-fence-engine-helpers), "
            "engine priority", "priority", SEED_TIER_CONFIG, reserve_sequences=3,
            reserve_follows_arrivals=True, gateway_flags=("--no-fence-engine-helpers",)),
        # (d) with the engine itself sending batch's and offline's streams 16 tokens a piece
        # (`stream_interval_tokens`, vLLM's per-request `stream_interval`, written in by the
        # gateway): fewer pieces made by vLLM's API server as well as fewer relayed.
        LabArm("z", "gateway-interval-priority",
            "gateway (seed 000 tiers, batch and offline stream_interval_tokens 16), engine "
            "priority", "priority", with_lower_tiers(SEED_TIER_CONFIG, stream_interval_tokens=16)),
        # (b) with the client asking vLLM for (z)'s pieces itself: what the interval alone does
        # to the engine, without a gateway, so that (z)'s distance from (b) splits into the
        # interval's and the hop's.
        LabArm("o", "direct-interval-priority",
            "engine direct, priority per tier, batch and offline streams asked for 16 tokens a "
            "piece by the client", "priority", send_priority=True, send_interval=16),
        # A change to the gateway judged against another revision in the same paired rounds:
        # (d) with the gateway's packages as at --gateway-rev (procs.gateway_source).
        LabArm("r", "gateway-rev-priority",
            "gateway at --gateway-rev (seed 000 tiers), engine priority, priority passed "
            "through", "priority", SEED_TIER_CONFIG, at_rev=True),
        # The A/A check: (b) once more, so that a run measures how far two identical arms
        # land apart (lab.headline --rounds judges it against (b) like any other arm).
        LabArm("i", "direct-priority-again", "engine direct, priority policy (b again, A/A)",
            "priority", send_priority=True),
        # The hop's floor: (b) through a bare relay on the gateway's own HTTP stack, so that a
        # run splits the gateway's distance from (b) into the hop's and the rest's.
        LabArm("p", "relay-floor-priority",
            "bare relay (the gateway's hop alone), engine priority, priority per tier",
            "priority", send_priority=True, relay=True),
    ]  # fmt: skip
