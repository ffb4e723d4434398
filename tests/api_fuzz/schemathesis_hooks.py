"""Hooks the fuzz run loads into schemathesis (SCHEMATHESIS_HOOKS names this file).

schemathesis reads YAML responses as one document, and the Kubernetes route answers several
(`GET /api/v1/launch-profiles/{id}/kubernetes/`, as `kubectl apply -f` takes them). Its reader
then raises inside a worker thread, which fails the run although the console answered 200.
Read every document instead; the run checks status codes only, so the value matters little.
"""

from __future__ import annotations

from typing import Any

import schemathesis
import yaml

# Every YAML media type schemathesis reads (its own reader would otherwise match one of them).
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/vnd.yaml")


@schemathesis.deserializer(*YAML_TYPES)
def every_document(_ctx: Any, response: Any) -> list[Any]:
    return list(yaml.safe_load_all(response.content.decode(response.encoding or "utf-8")))
