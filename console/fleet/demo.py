"""Demo data of the fleet app: two nodes for the demo's two managed agents.

`seed` writes settings.DATA_DIR / "demo-nodes.json" (mode 0600), which the demo launcher
reads to start one agent and one simulated engine per node:

    [{"name": "demo-node-1", "token": "tgn_...", "engine_port": 8101, "agent_port": 9101},
     {"name": "demo-node-2", "token": "tgn_...", "engine_port": 8102, "agent_port": 9102}]

Only the tokens' hashes are in the database. Idempotent: a node whose token in the file still
matches keeps it; otherwise a fresh token is made and the file rewritten. The tuning app's
seeder, which runs after this one, sets what versions they want.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from console.fleet import crypto, services
from console.fleet.endpoint_models import sync_gateway_models
from console.fleet.models import Node

DEMO_NODES = [("demo-node-1", 8101, 9101), ("demo-node-2", 8102, 9102)]
DEMO_FILE = "demo-nodes.json"


def _saved_tokens() -> dict[str, str]:
    path = settings.DATA_DIR / DEMO_FILE
    try:
        return {
            item["name"]: item["token"] for item in json.loads(path.read_text(encoding="utf-8"))
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def seed(ctx: Any) -> list[str]:
    admin = getattr(ctx, "admin", None)
    saved = _saved_tokens()
    entries: list[dict[str, Any]] = []
    nodes: list[Node] = []
    for name, engine_port, agent_port in DEMO_NODES:
        node = Node.objects.filter(name=name).first()
        token = saved.get(name, "")
        if node is None:
            node, token = services.create_node(name, ["demo"], admin)
        elif not token or crypto.sha256_hex(token) != node.token_sha256:
            token = services.rotate_node_token(node, admin)
        nodes.append(node)
        # A demo seeded before gateway endpoints kept their engine's model gets it now, so the
        # playground works on both nodes without "Fetch models".
        sync_gateway_models(node)
        entries.append(
            {"name": name, "token": token, "engine_port": engine_port, "agent_port": agent_port}
        )
    path = settings.DATA_DIR / DEMO_FILE
    path.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return [f"fleet: nodes {', '.join(n for n, _, _ in DEMO_NODES)} (tokens in {path})"]
