"""The headline experiment's arms, defined once: what each arm runs (engine policy, gateway tier
config, reserve) as data. arms.py runs them; `standard_arms()` lists every arm --arms may name
except (e), which the search makes (search.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.bench.headline.workload import (
    SEED_TIER_CONFIG,
    engine_sequences,
    with_admission,
    with_lower_tiers,
    with_queue,
)


@dataclass(frozen=True)
class Arm:
    key: str  # one letter, as --arms names it
    name: str  # short slug, used for files and run labels
    title: str
    policy: str  # the engine's --scheduling-policy
    tier_config: dict[str, Any] | None = None  # None: straight to the engine
    send_priority: bool = False  # the client sets vLLM's `priority` per tier itself
    # >0: the client asks vLLM itself for the tiers but online's streams this many tokens a
    # piece (the body's `stream_interval`), as a gateway arm's `stream_interval_tokens` does.
    send_interval: int = 0
    relay: bool = False  # through the bare relay (gpu_agent.relay_floor), no gateway
    at_rev: bool = False  # the gateway as at Options.gateway_rev (Setup.gateway_source)
    # >0: the gateway's max_in_flight is the engine's --max-num-seqs (as the agent sets it from
    # a launch profile) and its last `reserve_sequences` are `reserved_slots`.
    reserve_sequences: int = 0
    reserve_follows_arrivals: bool = False  # that reserve stands one slot per recent arrival
    reserve_caps_lower_tiers: bool = False  # it caps every request but online's own instead
    # max_in_flight left at the gateway's default, above the engine's: online may wait in the
    # engine's priority queue, and the capped reserve counts against the sequences the gateway
    # learns from /metrics (scheduler/rooms.py, `_slot_room`).
    urgent_waits_in_engine: bool = False
    gateway_flags: tuple[str, ...] = ()  # more of the agent's command-line flags

    @property
    def via_gateway(self) -> bool:
        return self.tier_config is not None

    def gateway_config(self, flags: list[str]) -> dict[str, Any] | None:
        """The tier config the arm's gateway runs against an engine started with `flags`."""
        if self.tier_config is None or not self.reserve_sequences:
            return self.tier_config
        extra = {"reserve_follows_arrivals": True} if self.reserve_follows_arrivals else {}
        if self.reserve_caps_lower_tiers:
            extra["reserve_caps_lower_tiers"] = True
        if not self.urgent_waits_in_engine:
            extra["max_in_flight"] = engine_sequences(flags)
        return with_admission(self.tier_config, reserved_slots=self.reserve_sequences, **extra)


def standard_arms() -> list[Arm]:
    """Issue 9's arms (a)-(d), issue 16's admission arms and the checks (i), (p), (r); arm (e)
    comes from the search (search.py)."""
    return [
        Arm("a", "direct-fcfs", "engine direct, fcfs", "fcfs"),
        Arm("b", "direct-priority", "engine direct, priority policy, priority per tier",
            "priority", send_priority=True),
        Arm("c", "gateway-seed-fcfs", "gateway (seed 000 tiers), engine fcfs", "fcfs",
            SEED_TIER_CONFIG),
        Arm("d", "gateway-seed-priority",
            "gateway (seed 000 tiers), engine priority, priority passed through", "priority",
            SEED_TIER_CONFIG),
        # Issue 16: the starvation bound raised so that offline gets its arrival share.
        Arm("f", "gateway-share-priority",
            "gateway (seed 000 tiers, admission.min_share 0.1), engine priority", "priority",
            with_admission(SEED_TIER_CONFIG, min_share=0.1)),
        # Issue 16: the age bound on offline (promoted one tier up after 1 s).
        Arm("g", "gateway-age-priority",
            "gateway (seed 000 tiers, offline promote_after_ms 1000), engine priority",
            "priority", with_queue(SEED_TIER_CONFIG, "offline", promote_after_ms=1000)),
        # Issue 16: (d) without the recovery reserve, to pair with (d) in one run.
        Arm("h", "gateway-noreserve-priority",
            "gateway (seed 000 tiers, admission.recovery_reserve 0), engine priority",
            "priority", with_admission(SEED_TIER_CONFIG, recovery_reserve=0)),
        # Issue 16: (d) without the starvation bound (strict priority, as the engine alone):
        # what serving the lower tiers their share costs online, paired with (d) in one run.
        Arm("s", "gateway-noshare-priority",
            "gateway (seed 000 tiers, admission.min_share 0), engine priority", "priority",
            with_admission(SEED_TIER_CONFIG, min_share=0)),
        # Issue 16: a standing reserve. Against a priority engine an urgent request still
        # waits for a running sequence to end (neither vLLM nor the simulator preempts for
        # one); (k) keeps one of the engine's sequences from the less urgent tiers at all times.
        Arm("k", "gateway-reserve1-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 1), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=1),
        # (k) with a larger reserve: in a saturated round the online P99 is one burst of online
        # arrivals waiting for running sequences to end, and how long depends on how many
        # long lower-tier sequences hold the engine then (docs/performance.md, "Where an
        # online P99 comes from"). (m) keeps 6 of vLLM's 16 from batch and offline.
        Arm("m", "gateway-reserve6-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=6),
        # (m) with half its reserve: on shared cores (m) cut online TTFT P99 but the engine ran
        # about 10.5 sequences and throughput fell to x0.86 (docs/performance.md, "Inside the
        # gateway on shared cores"); (n) asks where between (k) and (m) the balance lies.
        Arm("n", "gateway-reserve3-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 3), engine priority", "priority", SEED_TIER_CONFIG,
            reserve_sequences=3),
        # (m) whose reserve follows online's arrivals (one slot per online request of the last
        # 2 s): the same reserve while online arrives, every sequence for batch and offline
        # when it does not (the drain after the window, a lull). (m) held the lower tiers'
        # drain to 10 of 16 sequences and lost throughput by requests per second.
        Arm("q", "gateway-reserve6follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=6, reserve_follows_arrivals=True),
        # (q) with half its reserve: on its own core (q) cut online TTFT P99 to x0.68 of (b)'s
        # over 14 rounds, but the engine ran about 11 of its 16 sequences while online arrived
        # and streamed x0.95 the output tokens in the window; (w) asks whether 3 keeps most
        # of the gain for less (docs/performance.md, "The target read with its intervals").
        # Measured: docs/performance.md, "The smaller reserve (w)" (own core and shared cores).
        Arm("w", "gateway-reserve3follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 3 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=3, reserve_follows_arrivals=True),
        # (w) with a third of its reserve, between the seed's config (d) and (w): with vLLM's
        # threads on every core (d) kept x0.974 of engine priority's tokens but online TTFT
        # P99 rose x1.220, and (w) kept P99 (x0.840) at x0.917 the tokens (docs/performance.md,
        # "The every-core layout at the client with the passive wait policy"). Measured:
        # docs/performance.md, "A reserve of one sequence (y) beside (d)".
        Arm("y", "gateway-reserve1follow-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 1 following online's arrivals), engine priority", "priority",
            SEED_TIER_CONFIG, reserve_sequences=1, reserve_follows_arrivals=True),
        # (w) with the agent leaving vLLM's helpers (API server, engine-core process) where
        # they are, free to run on its OpenMP core: the agent's default moves them beside
        # itself (--fence-engine-helpers; docs/performance.md, "vLLM's helpers on its OpenMP core").
        Arm("x", "gateway-reserve3follow-nofence-priority",
            "gateway as (w), vLLM's helpers left where they are (--no-fence-engine-helpers), "
            "engine priority", "priority", SEED_TIER_CONFIG, reserve_sequences=3,
            reserve_follows_arrivals=True, gateway_flags=("--no-fence-engine-helpers",)),
        # (q) whose reserve caps batch's and offline's sequences at 16 - 6 instead of keeping
        # the last 6 of all 16 from them: online's requests take from the reserve, so the
        # engine runs 10 plus online's, not 10 in all. (m) and (q) left the engine at about
        # 10 of 16 in the window and lost 4-13% of the work done there.
        Arm("u", "gateway-reserve6cap-priority",
            "gateway (seed 000 tiers, max_in_flight = the engine's max_num_seqs, "
            "reserved_slots 6 following online's arrivals, capping the lower tiers), engine "
            "priority", "priority", SEED_TIER_CONFIG, reserve_sequences=6,
            reserve_follows_arrivals=True, reserve_caps_lower_tiers=True),
        # (u) without max_in_flight pinned to the engine's 16: (u)'s online tail waited in the
        # gateway for a lower-tier stream to end, then for the hand-off (the end seen, the
        # request sent, the engine's next step). Here online waits in vLLM's own queue, first
        # there, and the cap on batch and offline counts against the 16 the gateway reads from
        # vLLM's /metrics. Measured: at (b)'s P99 on shared cores, where (u) was worse, and
        # below (b)'s throughput (docs/performance.md, "Where online waits").
        Arm("v", "gateway-reserve6cap-engineq-priority",
            "gateway (seed 000 tiers, reserved_slots 6 following online's arrivals, capping "
            "the lower tiers at the engine's sequences less the reserve; online may queue in "
            "the engine), engine priority", "priority", SEED_TIER_CONFIG, reserve_sequences=6,
            reserve_follows_arrivals=True, reserve_caps_lower_tiers=True,
            urgent_waits_in_engine=True),
        # (d) with the lower tiers' streams read once per 100 ms after their first token
        # (`stream_pace_ms`): fewer reads, writes and wake-ups on the node for the half of the
        # streamed tokens that are batch's and offline's. With vLLM's threads on every core
        # the gateway cost the engine about 7% of its tokens, two thirds of it any relay's
        # (docs/performance.md, "A reserve of one sequence (y) beside (d)").
        Arm("t", "gateway-paced-priority",
            "gateway (seed 000 tiers, batch and offline stream_pace_ms 100), engine priority",
            "priority", with_lower_tiers(SEED_TIER_CONFIG, stream_pace_ms=100)),
        # (t) with the engine itself sending batch's and offline's streams 16 tokens a piece
        # (`stream_interval_tokens`, vLLM's per-request `stream_interval`, written in by the
        # gateway): fewer pieces made by vLLM's API server as well as fewer relayed, and a
        # stream's end sent at once where (t)'s waits up to a pace. (t) cut the gateway's CPU
        # by about an eighth (docs/performance.md, "The idle class, a burner, ..."). Measured:
        # docs/performance.md, "Pieces made by the engine".
        Arm("z", "gateway-interval-priority",
            "gateway (seed 000 tiers, batch and offline stream_interval_tokens 16), engine "
            "priority", "priority", with_lower_tiers(SEED_TIER_CONFIG, stream_interval_tokens=16)),
        # (b) with the client asking vLLM for (z)'s pieces itself: what the interval alone does
        # to the engine, without a gateway, so that (z)'s distance from (b) splits into the
        # interval's and the hop's.
        Arm("o", "direct-interval-priority",
            "engine direct, priority per tier, batch and offline streams asked for 16 tokens a "
            "piece by the client", "priority", send_priority=True, send_interval=16),
        # A change to the gateway judged against another revision in the same paired rounds:
        # (d) with the gateway's packages as at --gateway-rev (procs.gateway_source).
        Arm("r", "gateway-rev-priority",
            "gateway at --gateway-rev (seed 000 tiers), engine priority, priority passed "
            "through", "priority", SEED_TIER_CONFIG, at_rev=True),
        # The A/A check: (b) once more, so that a run measures how far two identical arms
        # land apart (perf.headline --rounds judges it against (b) like any other arm).
        Arm("i", "direct-priority-again", "engine direct, priority policy (b again, A/A)",
            "priority", send_priority=True),
        # The hop's floor: (b) through a bare relay on the gateway's own HTTP stack, so that a
        # run splits the gateway's distance from (b) into the hop's and the rest's.
        Arm("p", "relay-floor-priority",
            "bare relay (the gateway's hop alone), engine priority, priority per tier",
            "priority", send_priority=True, relay=True),
    ]  # fmt: skip


def arm_keys() -> str:
    """Every arm --arms may name: the standard ones and the search's (e)."""
    return "".join(sorted({arm.key for arm in standard_arms()} | {"e"}))
