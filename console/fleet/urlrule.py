"""What the console takes as a server's URL: the one rule behind endpoints' base URLs (forms,
API, model validators) and the listen URL a node's agent reports in its heartbeat."""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(value: str) -> str | None:
    """Why `value` is not an http(s) URL with a host, or None. Django's URLValidator is stricter
    than operators' networks: it refuses cluster-internal names without a dot
    (http://vllm-0:8000/v1)."""
    try:
        parts = urlsplit(value)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unclosed IPv6 bracket
        usable = False
    if not usable:
        return "Enter an http:// or https:// URL with a host."
    if any(ch.isspace() for ch in value):
        return "A URL cannot hold spaces."
    return None
