"""Audit log: who changed what, when, from where (docs/architecture.md#rollouts-and-rollbacks)."""
