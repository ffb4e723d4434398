"""The agent's command line (docs/architecture.md#stable-interfaces), read once into `AgentOptions`.

    python -m gpu_agent --engine-url URL | --engine-cmd "vllm serve ..." --listen HOST:PORT
        (--console URL --node-token T | --tier-config FILE --keys FILE) [options]

Bad input exits with code 2 and a message naming the problem (argparse's convention).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gpu_agent.state import default_state_dir
from gpu_agent.supervisor import DEFAULT_ENGINE_NICE

DEFAULT_MAX_BODY_BYTES = 1 << 20
# A client that reads nothing for this long while its response waits is cut off (nginx's
# send_timeout has the same default).
DEFAULT_CLIENT_WRITE_TIMEOUT_S = 60.0
# What the gateway holds for clients that read slower than the engine writes, per stream and
# in all (a 60,000-token answer is about 9 MiB of SSE); past it, reading the engine waits.
DEFAULT_CLIENT_BUFFER_BYTES = 16 << 20
DEFAULT_CLIENT_BUFFER_TOTAL_BYTES = 256 << 20
# A request body (at most --max-body-bytes, 1 MiB: 8 s at 1 Mbit/s) arrives within this of its
# head, or the client gets a 408 (docs/gateway.md, "Bounds").
DEFAULT_CLIENT_BODY_TIMEOUT_S = 20.0
# The bytes of request bodies being received at once, over all clients; past it a 429.
DEFAULT_BODY_BUDGET_BYTES = 64 << 20


@dataclass(frozen=True)
class AgentOptions:
    listen_host: str
    listen_port: int
    engine_url: str | None = None  # attached mode
    engine_cmd: tuple[str, ...] | None = None  # managed mode
    console_url: str | None = None
    node_token: str | None = None
    tier_config_file: Path | None = None
    keys_file: Path | None = None
    simulate: bool = False
    state_dir: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_level: str = "info"
    engine_start_timeout_s: float = 300.0
    engine_nice: int = DEFAULT_ENGINE_NICE
    keep_off_engine_cores: bool = True
    fence_engine_helpers: bool = True
    upstream_connect_timeout_s: float = 5.0
    upstream_read_timeout_s: float = 600.0
    upstream_pool_size: int = 1024
    client_write_timeout_s: float = DEFAULT_CLIENT_WRITE_TIMEOUT_S
    client_buffer_bytes: int = DEFAULT_CLIENT_BUFFER_BYTES
    client_buffer_total_bytes: int = DEFAULT_CLIENT_BUFFER_TOTAL_BYTES
    client_body_timeout_s: float = DEFAULT_CLIENT_BODY_TIMEOUT_S
    body_budget_bytes: int = DEFAULT_BODY_BUDGET_BYTES
    heartbeat_backoff_max_s: float = 30.0
    advertise_url: str | None = None

    @property
    def mode(self) -> str:
        return "managed" if self.engine_cmd is not None else "attached"

    @property
    def listen_url(self) -> str:
        return self.resolve_listen_url()[0]

    def resolve_listen_url(self) -> tuple[str, bool]:
        """Where others reach the gateway, and whether that is settled: --advertise-url, or
        the listen address; for a wildcard listen, the local address this host uses towards
        the console (a name lookup: call it off the event loop). Not settled when that lookup
        failed and 127.0.0.1 stands in."""
        if self.advertise_url:
            return self.advertise_url, True
        host, settled = self.listen_host.strip("[]"), True
        if host in ("0.0.0.0", "::", ""):
            local = _local_address_towards(self.console_url)
            host, settled = local or "127.0.0.1", local is not None
        if ":" in host:  # IPv6 in a URL
            host = f"[{host}]"
        return f"http://{host}:{self.listen_port}", settled


def _local_address_towards(url: str | None) -> str | None:
    """The source address the kernel picks for `url`'s host (a UDP connect sends nothing)."""
    if not url:
        return None
    host = urlsplit(url).hostname
    if not host:
        return None
    try:
        family, _, _, _, address = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(address)
            return str(probe.getsockname()[0])
    except OSError:
        return None


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--listen must be HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def _positive_int(value: str) -> int:
    if not value.isdigit() or int(value) <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return int(value)


def _positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not math.isfinite(number) or number <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_agent",
        description="Tiergate GPU node agent: priority gateway, telemetry, reconciler.",
    )
    engine = parser.add_mutually_exclusive_group(required=True)
    engine.add_argument("--engine-url", help="attached mode: front an engine started elsewhere")
    engine.add_argument("--engine-cmd", help='managed mode: run this engine, "vllm serve ..."')
    parser.add_argument("--listen", required=True, type=_listen, help="HOST:PORT of the gateway")
    parser.add_argument("--console", help="console base URL (managed by the console)")
    parser.add_argument(
        "--node-token",
        default=os.environ.get("TIERGATE_NODE_TOKEN"),
        help="node token (or env TIERGATE_NODE_TOKEN); also guards /agent/v1/status",
    )
    parser.add_argument("--tier-config", type=Path, help="standalone: tier config JSON file")
    parser.add_argument("--keys", type=Path, help="standalone: gateway keys JSON file")
    parser.add_argument(
        "--simulate", action="store_true", help="run `vllm serve ...` as the simulator"
    )
    parser.add_argument("--state-dir", type=Path, help="default ~/.local/state/tiergate-agent/PORT")
    parser.add_argument("--max-body-bytes", type=_positive_int, default=DEFAULT_MAX_BODY_BYTES)
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
    )
    parser.add_argument(
        "--engine-start-timeout", type=_positive_float, default=300.0, metavar="SECONDS"
    )
    parser.add_argument(
        "--keep-off-engine-cores",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the agent's threads off the cores the engine's threads are bound to one "
        "each (vLLM's CPU build binds its OpenMP threads so), where the agent has others "
        "(default on; the managed engine, or in attached mode the local one on the engine's "
        "port)",
    )
    parser.add_argument(
        "--fence-engine-helpers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --keep-off-engine-cores, also move the engine's threads that are not bound "
        "to one core (vLLM's API server and engine-core process) off its bound cores, beside "
        "the agent; given back when the agent stops (default on)",
    )
    parser.add_argument(
        "--engine-nice",
        type=int,
        choices=range(20),
        default=DEFAULT_ENGINE_NICE,
        metavar="N",
        help="managed mode: run the engine N steps nicer than the agent, so that the gateway "
        f"comes first where they share cores (default {DEFAULT_ENGINE_NICE}; 0: as the agent)",
    )
    parser.add_argument(
        "--upstream-read-timeout", type=_positive_float, default=600.0, metavar="SECONDS"
    )
    parser.add_argument("--upstream-pool-size", type=_positive_int, default=1024)
    parser.add_argument(
        "--client-write-timeout",
        type=_positive_float,
        default=DEFAULT_CLIENT_WRITE_TIMEOUT_S,
        metavar="SECONDS",
        help="end a streaming client that reads nothing for this long (default 60)",
    )
    parser.add_argument(
        "--client-buffer-bytes",
        type=_positive_int,
        default=DEFAULT_CLIENT_BUFFER_BYTES,
        help="bytes held per stream for a client slower than the engine (default 16 MiB)",
    )
    parser.add_argument(
        "--client-buffer-total-bytes",
        type=_positive_int,
        default=DEFAULT_CLIENT_BUFFER_TOTAL_BYTES,
        help="bytes held for slow clients over all streams (default 256 MiB)",
    )
    parser.add_argument(
        "--client-body-timeout",
        type=_positive_float,
        default=DEFAULT_CLIENT_BODY_TIMEOUT_S,
        metavar="SECONDS",
        help="answer 408 to a request whose body has not arrived this long after its head "
        "(default 20)",
    )
    parser.add_argument(
        "--body-budget-bytes",
        type=_positive_int,
        default=DEFAULT_BODY_BUDGET_BYTES,
        help="bytes of request bodies received at once over all clients; past it a 429 "
        "(default 64 MiB)",
    )
    parser.add_argument(
        "--heartbeat-backoff-max", type=_positive_float, default=30.0, metavar="SECONDS"
    )
    parser.add_argument(
        "--advertise-url", help="the gateway URL reported to the console (default: derived)"
    )
    return parser


def parse_args(argv: list[str] | None = None) -> AgentOptions:
    parser = build_parser()
    ns = parser.parse_args(argv)
    console_mode = ns.console is not None
    standalone = ns.tier_config is not None or ns.keys is not None
    if console_mode and standalone:
        parser.error("give either --console/--node-token or --tier-config/--keys, not both")
    if console_mode and not ns.node_token:
        parser.error("--console needs --node-token (or TIERGATE_NODE_TOKEN)")
    if not console_mode and (ns.tier_config is None or ns.keys is None):
        parser.error("give --console URL --node-token T, or --tier-config FILE --keys FILE")
    engine_cmd = None
    if ns.engine_cmd is not None:
        try:
            engine_cmd = tuple(shlex.split(ns.engine_cmd))
        except ValueError as exc:
            parser.error(f"--engine-cmd: {exc}")
        if not engine_cmd:
            parser.error("--engine-cmd is empty")
    if ns.engine_url is not None and not ns.engine_url.startswith(("http://", "https://")):
        parser.error(f"--engine-url must start with http:// or https://, got {ns.engine_url!r}")
    host, port = ns.listen
    return AgentOptions(
        listen_host=host,
        listen_port=port,
        engine_url=ns.engine_url.rstrip("/") if ns.engine_url else None,
        engine_cmd=engine_cmd,
        console_url=ns.console.rstrip("/") if ns.console else None,
        node_token=ns.node_token,
        tier_config_file=ns.tier_config,
        keys_file=ns.keys,
        simulate=ns.simulate,
        state_dir=ns.state_dir or default_state_dir(port),
        max_body_bytes=ns.max_body_bytes,
        log_level=ns.log_level,
        engine_start_timeout_s=ns.engine_start_timeout,
        engine_nice=ns.engine_nice,
        keep_off_engine_cores=ns.keep_off_engine_cores,
        fence_engine_helpers=ns.fence_engine_helpers,
        upstream_read_timeout_s=ns.upstream_read_timeout,
        upstream_pool_size=ns.upstream_pool_size,
        client_write_timeout_s=ns.client_write_timeout,
        client_buffer_bytes=ns.client_buffer_bytes,
        client_buffer_total_bytes=ns.client_buffer_total_bytes,
        client_body_timeout_s=ns.client_body_timeout,
        body_budget_bytes=ns.body_budget_bytes,
        heartbeat_backoff_max_s=ns.heartbeat_backoff_max,
        advertise_url=ns.advertise_url.rstrip("/") if ns.advertise_url else None,
    )
