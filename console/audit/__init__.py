"""Audit log: who changed what, when, from where (DESIGN.md 4)."""
