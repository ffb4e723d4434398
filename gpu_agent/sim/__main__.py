"""`python -m gpu_agent.sim serve MODEL [vLLM flags] [--sim-* flags]`."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

from gpu_agent.sim.config import parse_args
from gpu_agent.sim.server import create_app
from gpu_agent.sim.wire import StampedListener


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    app = create_app(config)
    print(
        f"simulated vLLM: {config.model_name} on {config.preset}, "
        f"{config.num_gpu_blocks} KV blocks of {config.block_size} tokens, "
        f"policy {config.scheduling_policy}, http://{config.host}:{config.port}",
        file=sys.stderr,
        flush=True,
    )
    options: dict[str, Any] = {
        "log_level": "warning",
        "access_log": False,
        "timeout_graceful_shutdown": 1,
    }
    if not config.wire_timestamps:
        uvicorn.run(app, host=config.host, port=config.port, **options)
        return 0
    listener = StampedListener(config.host, config.port)
    app.state.received_at = listener.received
    # Client addresses must stay the sockets' own for the lookup: no proxy headers.
    server = uvicorn.Server(uvicorn.Config(app, loop="asyncio", proxy_headers=False, **options))
    server.run(sockets=[listener])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
