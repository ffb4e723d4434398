"""``python -m gpu_agent``: build the agent from the command line and serve it on uvicorn."""

from __future__ import annotations

import logging
import sys

import uvicorn

from gpu_agent.agent import Agent, InputError, load_standalone
from gpu_agent.app import create_app
from gpu_agent.config import AgentOptions, parse_args
from gpu_agent.edge import EdgeLimits
from gpu_agent.edge import protocol as edge_protocol
from gpu_agent.reconciler import Reconciler
from gpu_agent.state import StateFile
from gpu_agent.supervisor import EngineSupervisor
from scheduler import default_config


def build_agent(options: AgentOptions) -> Agent:
    supervisor = None
    if options.engine_cmd is not None:
        supervisor = EngineSupervisor(
            list(options.engine_cmd),
            options.simulate,
            options.engine_start_timeout_s,
            nice=options.engine_nice,
        )
    if options.console_url is None:
        config, keys = load_standalone(options)
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
    except InputError as exc:
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
        # uvicorn's httptools protocol with the bounds it lacks: head and body deadlines, the
        # unauthenticated connections capped (docs/gateway.md, "Bounds").
        http=edge_protocol(EdgeLimits.of(options)),
        ws="none",  # no WebSocket route: an upgrade would leave the edge's bounds behind
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
