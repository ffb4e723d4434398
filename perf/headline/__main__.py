"""``python -m perf.headline``: run the headline experiment (console/bench/headline/), print
the table, write the JSON; with ``--store``, also store every arm as a benchmark run in the
console's database (what ``python manage.py headline`` does in one go).

`--engine vllm` uses tools/vllm_env.py's CPU build and tiny model unless `--vllm-model` names
another model (then `--vllm-command`, default `vllm`, serves it)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from console.bench.headline.experiment import run_experiment
from console.bench.headline.options import (
    add_experiment_arguments,
    add_vllm_arguments,
    check,
    options_from_args,
)
from console.bench.headline.procs import VllmEngine
from console.bench.headline.report import render
from console.bench.headline.workload import VLLM_HARDWARE


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m perf.headline",
        description="Tiered scheduling through the gateway against FCFS (issue 9).",
    )
    add_experiment_arguments(p)
    add_vllm_arguments(p)
    p.add_argument(
        "--engine-cores",
        choices=("own", "shared"),
        default="own",
        help="--engine vllm: vLLM on core 0, gateway and client on the others (own), or "
        "vLLM's threads, the gateway and the client all on every core (shared)",
    )
    p.add_argument(
        "--store",
        action="store_true",
        help="store each arm as a benchmark run in the console (DATABASE_URL, as manage.py)",
    )
    return p


def dev_vllm(nice: int) -> VllmEngine:
    """vLLM's CPU build on the tiny model (tools/vllm_env.py), pinned to core 0 by its shim,
    `nice` steps nicer than this process (--engine-nice)."""
    from tools import vllm_env

    vllm_env.require()
    return VllmEngine(
        command=(str(vllm_env.write_shim()),),
        model=str(vllm_env.ensure_model()),
        env=vllm_env.engine_env(),
        engine_cpus=vllm_env.engine_cpus(),
        description=VLLM_HARDWARE.format(version=vllm_env.VLLM_VERSION),
        nice=nice,
    )


def store_in_console(workdir: Path) -> None:
    """`manage.py headline --from-workdir`: perf/ may import the console, never the reverse."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("headline", from_workdir=workdir)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = check(args)
    if problem:
        parser.error(problem)
    if args.engine_cores == "shared":
        # tools/vllm_env.engine_cpus: vLLM binds a thread to each core; nothing else is pinned.
        os.environ["TIERGATE_VLLM_CPUS"] = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    vllm = dev_vllm(args.engine_nice) if args.engine == "vllm" and not args.vllm_model else None
    options = options_from_args(args, [sys.executable, "-m", "perf.headline", *argv], vllm)
    experiment = run_experiment(options, log=lambda m: print(m, file=sys.stderr))
    print(render(experiment.doc))
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(experiment.doc, indent=2), encoding="utf-8")
    if args.store:
        store_in_console(Path(experiment.doc["workdir"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
