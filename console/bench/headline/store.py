"""A finished headline experiment's work folder -> one ordinary benchmark run per arm, so the
compare page shows any two of them (`manage.py headline` runs the experiment, then this;
`manage.py headline --from-workdir DIR` stores an existing folder).

Each arm becomes a succeeded BenchmarkRun with its samples, summary and time series, against
an endpoint named "headline <arm>" (kind vllm for direct arms, gateway for gateway arms). The
configuration snapshot holds one pseudo-node with the arm's engine flags, tier config and the
simulated GPU, so the compare page's config diff names what differs (policy, tier settings).
The endpoints point at loopback ports that lived only during the experiment and keep no key:
they are records, not targets to run again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import transaction

from console.bench import lifecycle, services
from console.bench.choices import RunStatus
from console.bench.execution import store_result
from console.bench.models import BenchmarkRun
from console.fleet.choices import EndpointKind
from console.fleet.models import Endpoint
from loadgen import RunResult


class StoreError(Exception):
    """The folder is not a finished experiment's, or a run could not be stored."""


def _dt(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, tz=UTC)


def flags_to_args(flags: list[str]) -> dict[str, Any]:
    """Engine flags to launch args.

    `--max-num-seqs 32 --enable-prefix-caching`
    -> {"max_num_seqs": 32, "enable_prefix_caching": True}
    """
    args: dict[str, Any] = {}
    i = 0
    while i < len(flags):
        name = flags[i].lstrip("-").replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            raw = flags[i + 1]
            value: Any = raw
            for kind in (int, float):
                try:
                    value = kind(raw)
                    break
                except ValueError:
                    continue
            args[name] = value
            i += 2
        else:
            args[name] = True
            i += 1
    return args


def load_result(path: Path) -> RunResult:
    return RunResult.from_json_dict(json.loads(path.read_text(encoding="utf-8")))


def snapshot(doc: dict[str, Any], arm: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    tier_config = arm.get("tier_config")
    tier_ref = None
    if tier_config is not None:
        name = "seed 000" if tier_config == doc.get("seed_tier_config") else "headline search"
        tier_ref = {"id": None, "name": name, "version": 1, "config": tier_config}
    simulated = doc.get("engine", "sim") == "sim"
    node = {
        "id": None, "name": f"headline {'simulated' if simulated else 'vLLM'} node",
        "mode": "standalone",
        "tier_config": tier_ref, "tier_config_applied": tier_ref is not None,
        "launch_profile": None, "launch_profile_applied": False,
        "engine": {"model": endpoint.default_model, "args": flags_to_args(arm["engine_flags"]),
                   "simulated": simulated},
        "gpu": {
            "models": [arm["engine"].get("gpu") or ("simulated" if simulated else "none")],
            "count": 1,
            "source": "simulated" if simulated else "none",
        },
    }  # fmt: skip
    return {
        "taken_at": _dt(doc["started_at"]).isoformat(),
        "endpoint": {"id": endpoint.pk, "name": endpoint.name, "kind": endpoint.kind,
                     "base_url": endpoint.base_url},
        "nodes": [node],
        "headline": {
            "arm": arm["key"], "title": arm["title"], "command": doc["command"],
            "engine": arm["engine"], "gateway_rejections": arm["gateway_rejections"],
            "workload_rate_rps": doc["workload"]["rate_rps"], "machine": doc["machine"],
        },
    }  # fmt: skip


def store_arm(doc: dict[str, Any], arm: dict[str, Any], result: RunResult) -> BenchmarkRun:
    """One arm -> one succeeded BenchmarkRun, through the bench app's own services."""
    model = str(result.spec["model"])
    kind = EndpointKind.GATEWAY if arm["via_gateway"] else EndpointKind.VLLM
    endpoint, _ = Endpoint.objects.update_or_create(
        name=f"headline {arm['name']}",
        defaults={"base_url": result.spec["base_url"], "kind": kind, "default_model": model,
                  "models": [model]},
    )  # fmt: skip
    # The prompts file was a temporary of the experiment; the tier profiles describe it.
    workload = {k: v for k, v in result.spec.items() if k not in ("prompts_file", "api_key")}
    label = f"headline ({arm['key']}) {arm['title']}"
    notes = (
        f"{doc['experiment']}. {doc['hardware']}, time scale {doc['time_scale']:g}; "
        f"{doc['workload']['rate_rps']:.2f} req/s Poisson, seed {doc['workload']['seed']}. "
        f"Command: {doc['command']}"
    )
    with transaction.atomic():
        run = services.create_run(
            endpoint=endpoint, workload=workload, model=model,
            tier_profiles=doc["workload"]["tiers"], label=label[:200], notes=notes, enqueue=False,
        )  # fmt: skip
        if not lifecycle.claim(run.pk, now=_dt(result.started_at)):
            raise StoreError(f"run {run.pk}: could not be marked running")
    store_result(run.pk, result)
    measured = sum(1 for s in result.samples if not s.warmup)
    lifecycle.finish(
        run.pk, RunStatus.SUCCEEDED.value, "",
        summary=result.summary, timeseries=result.timeseries, validity=result.validity,
        measured_from=_dt(result.window[0]), measured_to=_dt(result.window[1]),
        config_snapshot=snapshot(doc, arm, endpoint), progress_percent=100.0,
        requests_done=measured, elapsed_s=result.finished_at - result.started_at,
        errors=int(result.summary.get("overall", {}).get("errors", 0)),
    )  # fmt: skip
    run.refresh_from_db()
    return run


def store_workdir(workdir: Path, log: Callable[[str], None] = print) -> list[BenchmarkRun]:
    """Every arm of the experiment in `workdir` (headline.json + arm-<key>.json), stored."""
    path = workdir / "headline.json"
    if not path.exists():
        raise StoreError(f"{path}: not found (is this a headline experiment's --workdir?)")
    doc = json.loads(path.read_text(encoding="utf-8"))
    results = {a["key"]: load_result(workdir / f"arm-{a['key']}.json") for a in doc["arms"]}
    runs = []
    for arm in doc["arms"]:
        run = store_arm(doc, arm, results[arm["key"]])
        runs.append(run)
        log(f"stored arm ({arm['key']}) as benchmark run #{run.pk}: {run.label}")
    return runs
