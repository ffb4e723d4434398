"""Gateway keys ("unified keys", docs/architecture.md#the-request-path): who may call the gateway
and in which tiers.

Keys are stored only as SHA-256 hex digests, so checking a request costs one hash and one dict
lookup. A key file or a heartbeat reply may give a plaintext ``key`` (hashed at load) or its
``sha256``; the plaintext is never kept.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class KeysError(ValueError):
    """A malformed keys file or key list; the message names the item and field."""


@dataclass(frozen=True, slots=True)
class GatewayKey:
    name: str
    sha256: str
    tiers: frozenset[str]
    default_tier: str

    def pick_tier(self, asked: str | None) -> str | None:
        """The tier for a request: the default, or the asked one if this key allows it."""
        if asked is None or asked == "":
            return self.default_tier
        return asked if asked in self.tiers else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "tiers": sorted(self.tiers),
            "default_tier": self.default_tier,
        }


# The console's own credentials, by their prefixes: an API token opens the console's REST API
# and a node token the agent's control routes, never the gateway's completion routes.
_NOT_GATEWAY_KEYS = {
    "tgt_": "a console API token (tgt_...)",
    "tgn_": "a node token (tgn_...)",
}


def unknown_key_message(token: str) -> str:
    """The 401 message for a token that is no gateway key here: where the token is visibly
    another of Tiergate's credentials, say which, and what a gateway takes instead."""
    for prefix, what in _NOT_GATEWAY_KEYS.items():
        if token.startswith(prefix):
            return (
                f"invalid API key: this is {what}; a gateway takes a gateway key (tgk_...), "
                "made on the console's Gateway keys page (docs/automation.md)"
            )
    return "invalid API key"


def hash_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_keys(items: Any, where: str = "keys") -> list[GatewayKey]:
    """Validate a JSON list of ``{"name", "key" | "sha256", "tiers", "default_tier"}``."""
    if not isinstance(items, list):
        raise KeysError(f"{where}: must be a JSON list of key objects")
    keys: list[GatewayKey] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise KeysError(f"{at}: must be an object")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise KeysError(f"{at}.name: must be a non-empty string")
        if "key" in item:
            if not isinstance(item["key"], str) or not item["key"]:
                raise KeysError(f"{at}.key: must be a non-empty string")
            digest = hash_key(item["key"])
        elif "sha256" in item:
            digest = item["sha256"]
            if not isinstance(digest, str) or not _HEX64.match(digest.lower()):
                raise KeysError(f"{at}.sha256: must be 64 hex digits")
            digest = digest.lower()
        else:
            raise KeysError(f"{at}: needs 'key' or 'sha256'")
        tiers = item.get("tiers")
        if not isinstance(tiers, list) or not tiers or not all(isinstance(t, str) for t in tiers):
            raise KeysError(f"{at}.tiers: must be a non-empty list of tier names")
        default = item.get("default_tier", tiers[0])
        if default not in tiers:
            raise KeysError(f"{at}.default_tier: {default!r} is not in tiers {tiers}")
        if digest in seen:
            raise KeysError(f"{at}: the same key appears twice")
        seen.add(digest)
        keys.append(GatewayKey(name, digest, frozenset(tiers), default))
    return keys


def load_keys_file(path: str | Path) -> list[GatewayKey]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise KeysError(f"keys file {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeysError(
            f"keys file {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    return parse_keys(data, where=f"keys file {path}")


class KeyStore:
    """The current keys, swapped atomically when the console sends a new set."""

    def __init__(self, keys: Iterable[GatewayKey] = ()) -> None:
        self._by_hash: dict[str, GatewayKey] = {}
        self.version = ""
        self.replace(keys)

    def replace(self, keys: Iterable[GatewayKey], version: str | None = None) -> None:
        # A new dict assigned in one step: a request in progress sees the old or the new set.
        self._by_hash = {k.sha256: k for k in keys}
        if version is not None:
            self.version = version

    def lookup(self, token: str) -> GatewayKey | None:
        return self._by_hash.get(hashlib.sha256(token.encode()).hexdigest())

    def __len__(self) -> int:
        return len(self._by_hash)

    def to_list(self) -> list[dict[str, Any]]:
        return [k.to_dict() for k in self._by_hash.values()]
