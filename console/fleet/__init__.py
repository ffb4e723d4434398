"""Fleet: GPU nodes and their agents, model endpoints (unified keys), gateway keys, the
heartbeat API and telemetry samples (docs/architecture.md)."""
