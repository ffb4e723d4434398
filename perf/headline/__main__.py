"""``python -m perf.headline``: run the experiment, print the table, write the JSON; with
``--store``, also store every arm as a benchmark run in the console's database (what
``python manage.py headline --from-workdir DIR`` does with a finished run's folder)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from perf.headline import Options, render, run_experiment
from perf.headline.workload import ENGINES


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m perf.headline",
        description="Tiered scheduling through the gateway against FCFS (issue 9).",
    )
    p.add_argument("--duration", type=float, default=60.0, help="measured seconds per arm")
    p.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds per arm")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--time-scale", type=float, default=1.0, help="simulator wall s per model s")
    p.add_argument("--rate", type=float, help="req/s; default: find the saturation point")
    p.add_argument("--load-factor", type=float, default=1.05, help="x saturation throughput")
    p.add_argument("--sweep-step", type=float, default=10.0, help="seconds per sweep step")
    p.add_argument("--search-trial", type=float, default=15.0, help="seconds per search trial")
    p.add_argument("--no-search", action="store_true", help="skip the search and arm (e)")
    p.add_argument("--arms", default="abcde", help="subset of a,b,c,d,e")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="sim",
        help="the simulator, or a real vLLM (CPU build, tiny model; make vllm-env)",
    )
    p.add_argument(
        "--engine-cores",
        choices=("own", "shared"),
        default="own",
        help="--engine vllm: vLLM on core 0, gateway and client on the others (own), or "
        "vLLM's threads, the gateway and the client all on every core (shared)",
    )
    p.add_argument("--workdir", type=Path, help="logs, configs, prompts (default: a temp dir)")
    p.add_argument("--json", dest="json_path", type=Path, help="write the whole record here")
    p.add_argument(
        "--store",
        action="store_true",
        help="store each arm as a benchmark run in the console (DATABASE_URL, as manage.py)",
    )
    return p


def store_in_console(workdir: Path) -> None:
    """`manage.py headline --from-workdir`: perf/ may import the console, never the reverse."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("headline", from_workdir=workdir)


def options_from_args(args: argparse.Namespace, argv: list[str]) -> Options:
    return Options(
        duration_s=args.duration,
        warmup_s=args.warmup,
        seed=args.seed,
        time_scale=args.time_scale,
        rate=args.rate,
        load_factor=args.load_factor,
        sweep_step_s=args.sweep_step,
        search_trial_s=None if args.no_search else args.search_trial,
        arms=args.arms,
        engine=args.engine,
        workdir=args.workdir,
        argv=argv,
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.engine == "vllm" and "e" in args.arms and not args.no_search:
        parser.error(
            "--engine vllm: the search starts a vLLM per trial (minutes each); "
            "add --no-search (or leave arm e out with --arms abcd)"
        )
    if args.engine_cores == "shared":
        # tools/vllm_env.engine_cpus: vLLM binds a thread to each core; nothing else is pinned.
        os.environ["TIERGATE_VLLM_CPUS"] = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    experiment = run_experiment(
        options_from_args(args, argv), log=lambda m: print(m, file=sys.stderr)
    )
    print(render(experiment.doc))
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(experiment.doc, indent=2), encoding="utf-8")
    if args.store:
        store_in_console(Path(experiment.doc["workdir"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
