"""`python -m gpu_agent.sim serve MODEL [vLLM flags] [--sim-* flags]`."""

from __future__ import annotations

import sys

import uvicorn

from gpu_agent.sim.config import parse_args
from gpu_agent.sim.server import create_app


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
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
