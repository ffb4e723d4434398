"""Tiergate GPU node agent: priority gateway, telemetry, reconciler and the simulated engine.

Modules (flat): config (command line), agent (runtime state), app (ASGI assembly and control
routes), gateway (the proxy hot path), errors, keys, metrics (Prometheus), telemetry (1 Hz
sampler), nvml, reconciler (heartbeats), state (state file), supervisor (engine process).
Run it with ``python -m gpu_agent`` (see config.py).
"""

__version__ = "0.1.0"
