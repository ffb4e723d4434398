"""The agent's state file: the last applied tier config, launch profile and gateway keys, so a
restarted agent serves with them before the console answers (or while it is down)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("gpu_agent.state")


def default_state_dir(listen_port: int) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "tiergate-agent" / str(listen_port)


class StateFile:
    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "state.json"

    def load(self) -> dict[str, Any]:
        """The saved state, or {} when there is none or it cannot be read (logged)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable state file %s: %s", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, state: dict[str, Any]) -> None:
        # Write then rename: a crash mid-write leaves the previous file, never half of one.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
