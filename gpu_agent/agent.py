"""The node agent's runtime state: one object the gateway, the control routes, the telemetry
sampler and the reconciler all read, built once from the command line's options.

Applying a tier config is a hot `reconfigure` of the dispatcher
(docs/architecture.md#the-dispatchers-semantics: drops nothing); keys are swapped as one dict; the
engine's address follows the supervisor in managed mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry

from gpu_agent import __version__
from gpu_agent.config import AgentOptions
from gpu_agent.core_keeper import CoreKeeper
from gpu_agent.keys import GatewayKey, KeysError, KeyStore, load_keys_file
from gpu_agent.metrics import AgentCollector, ControlCollector, GatewayMetrics
from gpu_agent.nvml import NvmlReader
from gpu_agent.supervisor import EngineStartError, EngineSupervisor
from gpu_agent.telemetry import Telemetry
from gpu_agent.upstream import UpstreamPool
from scheduler import AsyncDispatcher, ConfigError, Dispatcher, TierConfig, load_config_file
from scheduler.config import DEFAULT_MAX_IN_FLIGHT

log = logging.getLogger("gpu_agent")

TIER_CONFIG = "tier_config"
LAUNCH_PROFILE = "launch_profile"
GATEWAY_KEYS = "gateway_keys"
KEEPALIVE_S = 30.0  # an idle connection to the engine is closed after this


class InputError(ValueError):
    """A tier config or keys file that cannot be used; the message names file and field."""


def load_standalone(options: AgentOptions) -> tuple[TierConfig, list[GatewayKey]]:
    """Read and cross-check --tier-config and --keys (standalone mode)."""
    assert options.tier_config_file is not None and options.keys_file is not None
    path = options.tier_config_file
    try:
        config = load_config_file(path)
    except OSError as exc:
        raise InputError(f"tier config {path}: {exc.strerror or exc}") from exc
    except ConfigError as exc:
        raise InputError(f"tier config {path} is invalid:\n{exc}") from exc
    try:
        keys = load_keys_file(options.keys_file)
    except KeysError as exc:
        raise InputError(str(exc)) from exc
    for key in keys:
        unknown = sorted(key.tiers - set(config.scheduler.queues))
        if unknown:
            raise InputError(
                f"keys file {options.keys_file}: key {key.name!r} names tiers {unknown} "
                f"that the tier config does not define"
            )
    return config, keys


class Agent:
    def __init__(
        self,
        options: AgentOptions,
        tier_config: TierConfig,
        keys: list[GatewayKey],
        supervisor: EngineSupervisor | None = None,
        nvml: NvmlReader | None = None,
    ) -> None:
        self.options = options
        self.supervisor = supervisor
        self.keys = KeyStore(keys)
        self.config = tier_config
        self.driver = AsyncDispatcher(
            Dispatcher(tier_config, default_max_in_flight=self.default_max_in_flight)
        )
        self.registry = CollectorRegistry()
        self.metrics = GatewayMetrics(self.registry)
        self.telemetry = Telemetry(
            lambda: self.engine_url,
            self.driver.stats,
            self.metrics.interval,
            nvml=nvml,
            on_engine=self._engine_figures,
        )
        self.applied: dict[str, int | None] = {TIER_CONFIG: None, LAUNCH_PROFILE: None}
        self.apply_errors: dict[str, dict[str, Any]] = {}
        self.desired_seen: dict[str, int | None] = {TIER_CONFIG: None, LAUNCH_PROFILE: None}
        self.registry.register(
            AgentCollector(
                self.driver.stats,
                self.telemetry.latest,
                lambda: dict(self.applied),
                self.engine_health,
            )
        )
        self.registry.register(ControlCollector(lambda: self.apply_errors, self._heartbeat_state))
        # Which engine run (telemetry.engine_ups) refused `priority`; see engine_refuses_priority.
        self._priority_refused_by: int | None = None
        self._push_engine_policy()  # the launch flags (managed mode); attached: assumed
        self._session: aiohttp.ClientSession | None = None
        self._upstream: UpstreamPool | None = None
        self._engine_task: asyncio.Task[None] | None = None
        self.reconciler: Any = None  # gpu_agent.reconciler.Reconciler in console mode
        self.core_keeper = CoreKeeper(
            (lambda: supervisor.pid) if supervisor is not None else None,
            lambda: self.engine_url,
            enabled=options.keep_off_engine_cores,
            fence_helpers=options.fence_engine_helpers,
        )

    # -- facts read on the hot path -------------------------------------------------------

    @property
    def engine_url(self) -> str:
        if self.supervisor is not None:
            return self.supervisor.engine_url
        assert self.options.engine_url is not None
        return self.options.engine_url

    @property
    def session(self) -> aiohttp.ClientSession:
        """The control plane's client to the engine (/v1/models, /metrics, ...)."""
        assert self._session is not None, "the agent is not started"
        return self._session

    @property
    def upstream(self) -> UpstreamPool:
        """The hot path's client to the engine (gpu_agent/upstream.py)."""
        assert self._upstream is not None, "the agent is not started"
        return self._upstream

    @property
    def engine_refuses_priority(self) -> bool:
        """Set by the gateway when an attached engine refused `priority` (fcfs policy); holds
        until the engine next comes back up, perhaps restarted with the priority policy."""
        return self._priority_refused_by == self.telemetry.engine_ups

    @engine_refuses_priority.setter
    def engine_refuses_priority(self, refused: bool) -> None:
        self._priority_refused_by = self.telemetry.engine_ups if refused else None
        self._push_engine_policy()

    @property
    def pass_priority(self) -> bool:
        """Send vLLM's `priority` only when the config asks for it and the engine runs the
        priority policy (vLLM refuses a non-zero priority under fcfs): known from the launch
        flags in managed mode, learnt from the first refusal in attached mode. A pure read:
        the dispatcher was told the engine's policy when the agent learned it
        (`_push_engine_policy`)."""
        return self.config.scheduler.admission.pass_priority and self._engine_orders_by_priority()

    def _engine_orders_by_priority(self) -> bool:
        """The engine's scheduling policy as known now: vLLM's priority policy from the launch
        flags (managed mode), assumed (attached mode), unless the engine refused `priority`
        since it last came up."""
        if self.engine_refuses_priority:
            return False
        if self.supervisor is not None:
            return self.supervisor.args.get("scheduling_policy") == "priority"
        return True

    def _push_engine_policy(self) -> None:
        """Tell the dispatcher the engine's policy, wherever the agent learns it: at start (the
        launch flags), a new launch profile (`follow_engine_limits`), the engine's refusal
        (`engine_refuses_priority`) and each /metrics reading (`_engine_figures`: the engine
        came back up, perhaps restarted with the other policy). Only an engine that orders by
        priority lets urgent requests overtake the less urgent ones awaiting their first
        token there (docs/architecture.md#the-dispatchers-semantics); the dispatcher keeps
        the policy across reconfigures and adds the config's `pass_priority` itself."""
        self.driver.engine_policy(priority=self._engine_orders_by_priority())

    def priority_of(self, tier: str) -> int:
        """The engine priority of a tier's requests (the most urgent tier's for one that a
        reconfigure removed meanwhile)."""
        queue = self.config.scheduler.queues.get(tier)
        return queue.priority if queue is not None else self.promoted_priority

    @property
    def promoted_priority(self) -> int:
        """The engine priority of a request released by the starvation bound: the most
        urgent tier's."""
        queues = self.config.scheduler.queues
        return queues[self.config.tiers_by_urgency()[0]].priority

    def _engine_figures(self, engine: dict[str, Any]) -> None:
        # Called on each /metrics reading: the engine is up, and if it came back up since it
        # refused `priority`, that refusal has lapsed.
        self._push_engine_policy()
        # The engine's own queue length feeds the adaptive awaiting-first-token limit.
        waiting = engine.get("waiting")
        running = engine.get("running")
        if isinstance(waiting, int):
            self.driver.engine_waiting(
                waiting, running=running if isinstance(running, int) else None
            )

    @property
    def default_max_in_flight(self) -> int:
        if self.supervisor is not None:
            seqs = self.supervisor.args.get("max_num_seqs")
            if isinstance(seqs, int) and seqs > 0:
                return seqs
        # The launch profile's max_num_seqs is unknown (docs/architecture.md#tier-config).
        return DEFAULT_MAX_IN_FLIGHT

    def _heartbeat_state(self) -> tuple[float | None, int] | None:
        """(last accepted heartbeat's unix time, failures since) in console mode, else None."""
        if self.reconciler is None:
            return None
        return self.reconciler.last_success_unix, self.reconciler.failures

    def engine_health(self) -> str:
        if self.supervisor is not None and self.supervisor.state != "ok":
            return self.supervisor.state
        return self.telemetry.engine_health

    # -- changes --------------------------------------------------------------------------

    def apply_tier_config(self, config: TierConfig, version: int | None = None) -> None:
        """Hot reconfigure: queued and in-flight requests stay where they are. Also called,
        with the same config, after the engine's launch profile changed: a config without its
        own cap follows the engine's max_num_seqs."""
        self.driver.reconfigure(config, default_max_in_flight=self.default_max_in_flight)
        self.config = config
        self.applied[TIER_CONFIG] = version
        self.apply_errors.pop(TIER_CONFIG, None)
        log.info("tier config %s applied", version if version is not None else "(file)")

    def follow_engine_limits(self) -> None:
        """After the engine's command line changed: a tier config without its own cap on
        requests in flight follows the new max_num_seqs, and the dispatcher the new
        scheduling policy."""
        self.driver.reconfigure(self.config, default_max_in_flight=self.default_max_in_flight)
        self._push_engine_policy()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        options = self.options
        # The completions' own pool: its limit bounds the sockets to the engine.
        self._upstream = UpstreamPool(
            limit=options.upstream_pool_size,
            connect_timeout_s=options.upstream_connect_timeout_s,
            read_timeout_s=options.upstream_read_timeout_s,
            keepalive_s=KEEPALIVE_S,
        )
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self.options.upstream_connect_timeout_s,
            sock_read=self.options.upstream_read_timeout_s,
        )
        connector = aiohttp.TCPConnector(
            limit=self.options.upstream_pool_size,
            limit_per_host=self.options.upstream_pool_size,
            keepalive_timeout=KEEPALIVE_S,
        )
        # The control plane's client (the few requests that are not completions).
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),  # an engine sets none: no per-request lookup
        )
        self.driver.start()
        if self.options.tier_config_file is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload_files)
        if self.supervisor is not None:
            self._engine_task = asyncio.create_task(self._start_engine())
        self.telemetry.start()
        self.core_keeper.start()
        if self.reconciler is not None:
            self.reconciler.start()

    def reload_files(self) -> None:
        """SIGHUP in standalone mode: re-read both files and apply them hot; a bad file is
        logged and reported in the status, and the running config stays."""
        try:
            config, keys = load_standalone(self.options)
        except InputError as exc:
            log.error("reload refused, keeping the running config: %s", exc)
            self.apply_errors["reload"] = {"version": None, "error": str(exc)}
            return
        self.apply_tier_config(config)
        self.keys.replace(keys)
        self.apply_errors.pop("reload", None)
        log.info("reloaded %s and %s", self.options.tier_config_file, self.options.keys_file)

    async def _start_engine(self) -> None:
        assert self.supervisor is not None
        try:
            await self.supervisor.start()
        except EngineStartError as exc:
            log.error("engine did not start: %s", exc)

    async def aclose(self) -> None:
        if self.options.tier_config_file is not None:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        if self.reconciler is not None:
            await self.reconciler.aclose()
        await self.driver.aclose()
        await self.telemetry.aclose()
        await self.core_keeper.aclose()
        if self._engine_task is not None:
            self._engine_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._engine_task
        if self.supervisor is not None:
            await self.supervisor.aclose()
        if self._session is not None:
            await self._session.close()
        if self._upstream is not None:
            self._upstream.close()

    # -- reports --------------------------------------------------------------------------

    def health(self) -> dict[str, str]:
        detail = self.supervisor.detail if self.supervisor is not None else ""
        return {"gateway": "ok", "engine": self.engine_health(), "detail": detail}

    @property
    def engine_report(self) -> dict[str, Any] | None:
        """The managed engine's version and accepted arguments (gpu_agent.engine_report)."""
        return self.supervisor.report if self.supervisor is not None else None

    def engine_info(self) -> dict[str, Any]:
        models = self.telemetry.models
        report = self.engine_report
        return {
            "url": self.engine_url,
            "model": models[0] if models else None,
            "simulated": self.telemetry.simulated,
            "args": self.supervisor.args if self.supervisor is not None else {},
            "version": report.get("version") if report else None,
            "report_digest": report["digest"] if report else None,
            # Set where a CPU vLLM's OpenMP threads leave the agent no core (gpu_agent.cores).
            "cores_warning": self.supervisor.cores["warning"]
            if self.supervisor is not None and self.supervisor.cores is not None
            else None,
        }

    def status(self) -> dict[str, Any]:
        stats = self.driver.stats()
        tiers = {
            name: {
                "priority": tier.priority,
                "depth": tier.depth,
                "in_flight": tier.in_flight,
                "awaiting_first_token": tier.awaiting_first_token,
                "effective_wait_s": tier.effective_wait_s,
                "released": tier.released,
                "cancelled": tier.cancelled,
                "rejections": dict(tier.rejections),
            }
            for name, tier in stats.tiers.items()
        }
        return {
            "agent_version": __version__,
            "mode": self.options.mode,
            "applied": dict(self.applied),
            "apply_errors": dict(self.apply_errors),
            "desired_seen": dict(self.desired_seen),
            "keys_version": self.keys.version,
            "keys": len(self.keys),
            "health": self.health(),
            "tiers": tiers,
            "in_flight": stats.in_flight,
            "max_in_flight": stats.max_in_flight,
            "awaiting_limit": stats.max_awaiting_first_token,
            "awaiting_limit_adaptive": stats.awaiting_limit_adaptive,
            # Slots the less urgent tiers leave to the most urgent now (scheduler/reserve.py).
            "reserved_slots": stats.reserved_slots,
            # Online requests that may await in the engine as online while online is backed
            # up (the feed, scheduler/awaiting.py); null otherwise.
            "awaiting_feed": stats.awaiting_feed,
            # The engine's sequence limit as the gateway learned it (null until then).
            "engine_sequences": stats.engine_sequences,
            "engine": {
                **self.engine_info(),
                "pid": self.supervisor.pid if self.supervisor else None,
                "refuses_priority": self.engine_refuses_priority,
            },
            # Where the engine's threads are bound and where the agent keeps (gpu_agent.cores):
            # `binding` is what the managed engine's environment asks of vLLM's CPU build.
            "cores": {
                "binding": self.supervisor.cores if self.supervisor else None,
                **self.core_keeper.report(),
            },
        }
