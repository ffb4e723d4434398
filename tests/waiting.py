"""Polling for a condition that another process or thread brings about."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[..., T], timeout: float = 20.0, what: str = "condition", poll: float = 0.05
) -> T:
    """Call `predicate` every `poll` seconds until it returns something truthy, and return
    that; AssertionError naming `what` if it has not after `timeout` seconds.

    `predicate` is called with no arguments; typed `...` so that a lambda binding a loop
    variable as a default (``lambda n=node: ...``) type-checks."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


def wait_answering(url: str, timeout: float = 20.0) -> None:
    """Wait until an HTTP server answers `url` at all (any status)."""
    import httpx

    def answers() -> bool:
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            return False
        return True

    wait_for(answers, timeout, what=f"{url} to answer")
