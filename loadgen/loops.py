"""The event loop the load generator runs on, for every entry point (the CLI, a shard process,
the reference server, lab scripts): uvloop when it is installed, since the cheaper loop keeps
the client's own overhead out of the latencies it measures; the stock loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None (asyncio's default) where uvloop is missing."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover  (uvloop is a product dependency off Windows)
        return None
    return uvloop.new_event_loop


def new_runner() -> asyncio.Runner:
    """An `asyncio.Runner` on the loop above; use it as a context manager."""
    return asyncio.Runner(loop_factory=loop_factory())
