"""``python -m gpu_agent``: build the agent from the command line and serve it on uvicorn."""

from __future__ import annotations

import logging
import sys

import uvicorn

from gpu_agent.agent import Agent
from gpu_agent.app import create_app
from gpu_agent.config import AgentOptions, parse_args
from gpu_agent.keys import GatewayKey, KeysError, load_keys_file
from gpu_agent.reconciler import Reconciler
from gpu_agent.state import StateFile
from gpu_agent.supervisor import EngineSupervisor
from scheduler import ConfigError, TierConfig, default_config, load_config_file


class StartupError(Exception):
    """Bad input found before serving; exit code 2."""


def _standalone_inputs(options: AgentOptions) -> tuple[TierConfig, list[GatewayKey]]:
    assert options.tier_config_file is not None and options.keys_file is not None
    path = options.tier_config_file
    try:
        config = load_config_file(path)
    except OSError as exc:
        raise StartupError(f"tier config {path}: {exc.strerror or exc}") from exc
    except ConfigError as exc:
        raise StartupError(f"tier config {path} is invalid:\n{exc}") from exc
    try:
        keys = load_keys_file(options.keys_file)
    except KeysError as exc:
        raise StartupError(str(exc)) from exc
    for key in keys:
        unknown = sorted(key.tiers - set(config.scheduler.queues))
        if unknown:
            raise StartupError(
                f"keys file {options.keys_file}: key {key.name!r} names tiers {unknown} "
                f"that the tier config does not define"
            )
    return config, keys


def build_agent(options: AgentOptions) -> Agent:
    supervisor = None
    if options.engine_cmd is not None:
        supervisor = EngineSupervisor(
            list(options.engine_cmd), options.simulate, options.engine_start_timeout_s
        )
    if options.console_url is None:
        config, keys = _standalone_inputs(options)
        return Agent(options, config, keys, supervisor=supervisor)
    # Console mode: start with the seed's tiers and no keys until the saved state or the
    # console says otherwise.
    agent = Agent(options, default_config(), [], supervisor=supervisor)
    assert options.node_token is not None and options.state_dir is not None
    reconciler = Reconciler(
        agent,
        options.console_url,
        options.node_token,
        StateFile(options.state_dir),
        backoff_max_s=options.heartbeat_backoff_max_s,
    )
    reconciler.restore()
    agent.reconciler = reconciler
    return agent


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    logging.basicConfig(
        level=options.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request at INFO: the sampler alone would write three lines a second.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        agent = build_agent(options)
    except StartupError as exc:
        print(f"python -m gpu_agent: error: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(
        create_app(agent),  # type: ignore[arg-type]
        host=options.listen_host,
        port=options.listen_port,
        log_level="warning" if options.log_level == "info" else options.log_level,
        access_log=False,  # a log line per request would cost more than the gateway itself
        lifespan="on",
        proxy_headers=False,  # client addresses are not used; skip the per-request rewrite
        timeout_graceful_shutdown=5,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
