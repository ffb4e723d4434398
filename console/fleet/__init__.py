"""Fleet: GPU nodes and their agents, model endpoints (unified keys), gateway keys, the
heartbeat API and telemetry samples (DESIGN.md 2.1, 3, 4, 5)."""
