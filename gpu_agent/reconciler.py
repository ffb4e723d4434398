"""Heartbeat client and reconciler (docs/architecture.md#rollouts-and-rollbacks, docs/protocol.md).

Every beat posts the samples taken since the last accepted beat, the applied versions and the
health; the reply says what is desired. A differing tier config is hot-applied, a differing
launch profile restarts the engine (managed mode, in the background so beats go on), new
gateway keys replace the old. What was applied is saved to the state file.

While the console is unreachable the agent keeps serving with what it has; the samples pile up
in the telemetry ring (bounded, the oldest fall off) and the beats back off exponentially up to
a cap, so the first beat after an outage carries the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import httpx

from gpu_agent import __version__
from gpu_agent.agent import GATEWAY_KEYS, LAUNCH_PROFILE, TIER_CONFIG, Agent
from gpu_agent.keys import KeysError, parse_keys
from gpu_agent.state import StateFile
from gpu_agent.supervisor import EngineStartError
from scheduler import ConfigError, config_to_dict, parse_config, without_removed

log = logging.getLogger("gpu_agent.reconciler")

MAX_SAMPLES_PER_BEAT = 600  # the protocol's bound
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 10.0
ATTACHED_PROFILE_ERROR = "launch profiles are not applicable in attached mode"


def next_backoff(current: float, interval: float, cap: float) -> float:
    """Doubling delay after consecutive failures: interval, 2x, 4x, ... up to `cap`."""
    return min(cap, max(interval, current * 2))


class Reconciler:
    def __init__(
        self,
        agent: Agent,
        console_url: str,
        node_token: str,
        state_file: StateFile,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.agent = agent
        self.url = console_url.rstrip("/") + "/api/v1/agent/heartbeat"
        self.state_file = state_file
        self.backoff_max_s = backoff_max_s
        self.interval_s = 1.0
        self.acked_seq = 0
        self.failures = 0
        self.last_error = ""
        self.last_success_unix: float | None = None  # exported for the stale-agent alert
        self._state: dict[str, Any] = state_file.load()
        self._failed_profile: int | None = None
        # The engine report the console holds (its reply echoes the digest): the full report
        # travels only until the console has it.
        self.console_report_digest: str | None = None
        self._listen_url = ""
        self._listen_settled = False
        self._profile_task: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(5.0, connect=2.0),
            headers={"Authorization": f"Bearer {node_token}"},
        )

    # -- restart with the saved state -----------------------------------------------------

    def restore(self) -> None:
        """Apply the saved tier config, keys and (managed mode) launch command line."""
        agent = self.agent
        # The engine's command line first: the tier config's default cap follows its max_num_seqs.
        profile = self._state.get(LAUNCH_PROFILE)
        if agent.supervisor is not None and isinstance(profile, dict):
            argv = profile.get("argv")
            if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
                agent.supervisor.argv = list(argv)
                agent.applied[LAUNCH_PROFILE] = profile.get("id")
                agent.follow_engine_limits()
        saved = self._state.get(TIER_CONFIG)
        if isinstance(saved, dict) and isinstance(saved.get("config"), dict):
            try:
                config = parse_config(
                    _current(saved["config"]), default_max_in_flight=agent.default_max_in_flight
                )
            except ConfigError as exc:
                log.warning("saved tier config is invalid, not used: %s", exc)
            else:
                agent.apply_tier_config(config, saved.get("id"))
        keys = self._state.get(GATEWAY_KEYS)
        if isinstance(keys, list):
            try:
                agent.keys.replace(parse_keys(keys), str(self._state.get("keys_version", "")))
            except KeysError as exc:
                log.warning("saved gateway keys are invalid, not used: %s", exc)

    def _save(self) -> None:
        try:
            self.state_file.save(self._state)
        except OSError as exc:
            log.warning("cannot write state file %s: %s", self.state_file.path, exc)

    # -- loop ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="heartbeat")

    async def aclose(self) -> None:
        for task in (self._task, self._profile_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._client.aclose()

    async def _run(self) -> None:
        backoff = 0.0
        while True:
            if await self.beat():
                backoff = 0.0
                delay = self.interval_s
            else:
                backoff = next_backoff(backoff, self.interval_s, self.backoff_max_s)
                delay = backoff
            await asyncio.sleep(delay)

    def body(self) -> tuple[int, dict[str, Any]]:
        agent = self.agent
        seq, samples = agent.telemetry.since(self.acked_seq)
        body: dict[str, Any] = {
            "agent_version": __version__,
            "mode": agent.options.mode,
            "listen_url": self._listen_url,
            "applied": dict(agent.applied),
            "keys_version": agent.keys.version,
            "health": agent.health(),
            "engine": agent.engine_info(),
            "samples": samples[-MAX_SAMPLES_PER_BEAT:],
        }
        report = agent.engine_report
        if report is not None and report["digest"] != self.console_report_digest:
            body["engine"]["report"] = report
        if agent.apply_errors:
            body["apply_errors"] = dict(agent.apply_errors)
        return seq, body

    async def beat(self) -> bool:
        """One heartbeat; True when the console accepted it."""
        if not self._listen_settled:
            # A name lookup: in a thread, not on the loop that serves the gateway; once settled
            # it is not repeated, until then it is retried each beat (and said once).
            first = not self._listen_url
            self._listen_url, self._listen_settled = await asyncio.to_thread(
                self.agent.options.resolve_listen_url
            )
            if not self._listen_settled and first:
                log.warning(
                    "cannot tell this host's address towards the console; reporting %s",
                    self._listen_url,
                )
        seq, body = self.body()
        try:
            response = await self._client.post(self.url, json=body)
        except httpx.HTTPError as exc:
            return self._failed(f"console unreachable: {exc!r}")
        if response.status_code != 200:
            return self._failed(f"console answered {response.status_code}: {response.text[:300]}")
        try:
            reply = response.json()
        except ValueError:
            return self._failed("console reply is not JSON")
        if self.failures:
            log.info("console reachable again after %d failed beats", self.failures)
        self.failures = 0
        self.last_error = ""
        self.last_success_unix = time.time()
        self.acked_seq = seq
        self.apply(reply if isinstance(reply, dict) else {})
        return True

    def _failed(self, error: str) -> bool:
        if self.failures == 0 or error != self.last_error:
            log.warning("heartbeat failed: %s", error)
        self.failures += 1
        self.last_error = error
        return False

    # -- applying the reply ---------------------------------------------------------------

    def apply(self, reply: dict[str, Any]) -> None:
        digest = reply.get("engine_report_digest")
        self.console_report_digest = digest if isinstance(digest, str) else None
        interval = reply.get("heartbeat_interval_s")
        if isinstance(interval, int | float):
            self.interval_s = min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, float(interval)))
        desired = reply.get("desired")
        if isinstance(desired, dict):
            self._apply_tier_config(desired.get(TIER_CONFIG))
            self._apply_launch_profile(desired.get(LAUNCH_PROFILE))
        if reply.get("gateway_keys") is not None:  # absent or null: keys unchanged
            self._apply_keys(reply["gateway_keys"], str(reply.get("keys_version", "")))

    def _forget_errors(self, kind: str, desired: Any) -> None:
        """An apply error is about a desired version: once that version is no longer desired
        (another one, or none), it is history and not reported again (docs/protocol.md)."""
        error = self.agent.apply_errors.get(kind)
        if error is not None and error.get("version") != desired:
            del self.agent.apply_errors[kind]
        if kind == LAUNCH_PROFILE and self._failed_profile != desired:
            self._failed_profile = None  # desired again later: worth another try

    def _apply_tier_config(self, wanted: Any) -> None:
        agent = self.agent
        if not isinstance(wanted, dict):
            # Nothing desired: keep the config it runs, report no drift and no error for it.
            agent.desired_seen[TIER_CONFIG] = None
            self._forget_errors(TIER_CONFIG, None)
            return
        version = wanted.get("id")
        agent.desired_seen[TIER_CONFIG] = version
        self._forget_errors(TIER_CONFIG, version)
        if version == agent.applied[TIER_CONFIG] or "config" not in wanted:
            return
        try:
            config = parse_config(
                _current(wanted["config"]), default_max_in_flight=agent.default_max_in_flight
            )
        except ConfigError as exc:
            agent.apply_errors[TIER_CONFIG] = {"version": version, "error": str(exc)}
            return
        agent.apply_tier_config(config, version)
        self._state[TIER_CONFIG] = {
            "id": version,
            "name": wanted.get("name"),
            "config": config_to_dict(config),
        }
        self._save()

    def _apply_launch_profile(self, wanted: Any) -> None:
        agent = self.agent
        if not isinstance(wanted, dict):
            # Nothing desired: keep the engine as it runs (no restart), and no error for it.
            agent.desired_seen[LAUNCH_PROFILE] = None
            self._forget_errors(LAUNCH_PROFILE, None)
            return
        version = wanted.get("id")
        agent.desired_seen[LAUNCH_PROFILE] = version
        self._forget_errors(LAUNCH_PROFILE, version)
        if version == agent.applied[LAUNCH_PROFILE]:
            return
        if agent.supervisor is None:
            agent.apply_errors[LAUNCH_PROFILE] = {
                "version": version,
                "error": ATTACHED_PROFILE_ERROR,
            }
            return
        argv = wanted.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            # Said, not ignored: a rollout waiting for this node stops with the reason.
            agent.apply_errors[LAUNCH_PROFILE] = {
                "version": version,
                "error": "the console sent no engine command line (argv) for this profile",
            }
            return
        busy = self._profile_task is not None and not self._profile_task.done()
        # A profile that failed once is not retried every beat: a new version must be desired.
        if busy or version == self._failed_profile:
            return
        if agent.supervisor.runs(argv):
            # Adopted from the engine as it runs (the console's "save running flags"): applied
            # as it is, without a restart.
            self._profile_applied(version, wanted)
            return
        self._profile_task = asyncio.create_task(self._restart(version, wanted, argv))

    async def _restart(self, version: int | None, wanted: dict[str, Any], argv: list[str]) -> None:
        agent = self.agent
        assert agent.supervisor is not None
        try:
            await agent.supervisor.restart(argv)
        except EngineStartError as exc:
            agent.telemetry.models = None  # the engine that runs now may serve other names
            self._failed_profile = version
            agent.apply_errors[LAUNCH_PROFILE] = {"version": version, "error": str(exc)}
            return
        agent.telemetry.models = None
        self._profile_applied(version, wanted)

    def _profile_applied(self, version: int | None, wanted: dict[str, Any]) -> None:
        agent = self.agent
        assert agent.supervisor is not None
        agent.applied[LAUNCH_PROFILE] = version
        agent.apply_errors.pop(LAUNCH_PROFILE, None)
        agent.follow_engine_limits()
        self._state[LAUNCH_PROFILE] = {
            "id": version,
            "name": wanted.get("name"),
            "argv": agent.supervisor.argv,  # as it runs: with the node's own --host/--port
            "args": wanted.get("args"),
        }
        self._save()

    def _apply_keys(self, items: Any, version: str) -> None:
        agent = self.agent
        try:
            keys = parse_keys(items, where="gateway_keys")
        except KeysError as exc:
            agent.apply_errors[GATEWAY_KEYS] = {"version": version, "error": str(exc)}
            return
        agent.keys.replace(keys, version)
        agent.apply_errors.pop(GATEWAY_KEYS, None)
        self._state[GATEWAY_KEYS] = agent.keys.to_list()
        self._state["keys_version"] = version
        self._save()


def _current(document: dict[str, Any]) -> dict[str, Any]:
    """A stored or desired tier config without the fields the schema has since removed (a
    version saved before the removal still applies), each dropped field logged."""
    current, dropped = without_removed(document)
    if dropped:
        log.warning("tier config: removed fields ignored: %s", ", ".join(dropped))
    return current
