"""Tiergate GPU node agent: priority gateway, telemetry, reconciler and the simulated engine."""
