"""``python -m lab.headline``: run the headline experiment (console/bench/headline/), print
the table, write the JSON; with ``--store``, also store every arm as a benchmark run in the
console's database (what ``python manage.py headline`` does in one go).

`--engine vllm` uses tools/vllm_env.py's CPU build and tiny model unless `--vllm-model` names
another model (then `--vllm-command`, default `vllm`, serves it).

`--rounds N` runs the arms N times, paired, and judges each against `--reference` (default b)
over the rounds, run-to-run noise included (rounds.py); `--json` then writes that record,
after every round (the rounds done so far) and at the end, so a run stopped part-way (Ctrl-C,
SIGTERM) keeps its finished rounds for lab.headline.pool.

Besides the product's arms (a)-(e) it runs the lab's (lab/headline/arms.py): `--arms` takes
any of their letters, and arm r runs the gateway as at `--gateway-rev`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.bench.headline.catalog import Arm, arm_keys
from console.bench.headline.experiment import Options, run_experiment
from console.bench.headline.options import (
    add_experiment_arguments,
    add_vllm_arguments,
    check,
    options_from_args,
)
from console.bench.headline.procs import VllmEngine
from console.bench.headline.report import render
from console.bench.headline.workload import VLLM_HARDWARE
from lab.headline.arms import LabArm, lab_arms
from lab.headline.procs import gateway_source
from lab.headline.rounds import render_judgement, render_steady, run_rounds
from tools.vllm_env import LAYOUTS, use_layout


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lab.headline",
        description="Tiered scheduling through the gateway against FCFS (issue 9).",
    )
    add_experiment_arguments(p, arm_keys(lab_arms()))
    add_vllm_arguments(p)
    p.add_argument(
        "--gateway-rev",
        metavar="REV",
        help="arm r: (d) with the gateway (gpu_agent, scheduler) as at this git revision, to "
        "judge a change against it in the same paired rounds",
    )
    p.add_argument(
        "--engine-cores",
        choices=LAYOUTS,
        default="own",
        help="--engine vllm: vLLM on core 0, gateway and client on the others (own); vLLM's "
        "threads, the gateway and the client all on every core (shared); or vLLM's own default "
        "binding, its threads on all cores but one it reserves, nothing else pinned (auto)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        choices=range(1, 21),
        default=1,
        metavar="N",
        help="run the arms N times (1-20), paired, and judge them over the rounds",
    )
    p.add_argument(
        "--reference",
        default="b",
        help="--rounds: the arm the others are judged against (default b, engine priority)",
    )
    p.add_argument(
        "--store",
        action="store_true",
        help="store each arm as a benchmark run in the console (DATABASE_URL, as manage.py)",
    )
    return p


def dev_vllm(nice: int, size: tuple[int, int] | None = None) -> VllmEngine:
    """vLLM's CPU build on the tiny model (tools/vllm_env.py), or one of `size` (hidden,
    layers), pinned to core 0 by its shim, `nice` steps nicer than this process
    (--engine-nice)."""
    from tools import tiny_model, vllm_env

    vllm_env.require()
    hidden, layers = size or (tiny_model.HIDDEN, tiny_model.LAYERS)
    return VllmEngine(
        command=(str(vllm_env.write_shim()),),
        model=str(vllm_env.ensure_model(size=size)),
        env=vllm_env.engine_env(),
        engine_cpus=vllm_env.engine_cpus(),
        description=VLLM_HARDWARE.format(
            version=vllm_env.VLLM_VERSION, layers=layers, hidden=hidden
        ),
        nice=nice,
    )


def store_in_console(workdir: Path) -> None:
    """`manage.py headline --from-workdir`: lab/ may import the console, never the reverse."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("headline", from_workdir=workdir)


def check_lab(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of options (None: nothing): the product's rules
    (options.check) over the lab's arms, and the lab's own options."""
    problem = check(args, arm_keys(lab_arms()))
    if problem is None and ("r" in args.arms) != bool(args.gateway_rev):
        problem = "--gateway-rev: arm r needs it, and it is for arm r only"
    if problem is None and args.rounds > 1 and args.reference not in args.arms:
        problem = f"--reference {args.reference}: not among --arms {args.arms}"
    return problem


def catalog(rev: str | None, workdir: Path | None, log: Callable[[str], None]) -> list[Arm]:
    """The lab's arms, arm r's gateway from revision `rev`'s packages (written under `workdir`,
    else a temporary folder) when `rev` is given."""
    arms = lab_arms()
    if not rev:
        return arms
    dest = workdir or Path(tempfile.mkdtemp(prefix="tiergate-gateway-rev-"))
    dest.mkdir(parents=True, exist_ok=True)
    source = gateway_source(rev, dest)
    log(f"arm (r): the gateway as at {rev}, from {source}")
    return [
        dataclasses.replace(a, source=source) if isinstance(a, LabArm) and a.at_rev else a
        for a in arms
    ]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = check_lab(args)
    if problem:
        parser.error(problem)
    use_layout(args.engine_cores)
    vllm = dev_vllm(args.engine_nice) if args.engine == "vllm" and not args.vllm_model else None
    options = options_from_args(args, [sys.executable, "-m", "lab.headline", *argv], vllm)
    try:
        arms = catalog(args.gateway_rev, options.workdir, _log)
    except ValueError as exc:
        parser.error(str(exc))
    if args.rounds > 1:
        return _rounds(args, options, arms)
    experiment = run_experiment(options, log=_log, catalog=arms)
    print(render(experiment.doc))
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(experiment.doc, indent=2), encoding="utf-8")
    if args.store:
        store_in_console(Path(experiment.doc["workdir"]))
    return 0


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Whole or not at all: a run stopped while writing leaves the last complete record."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    os.replace(part, path)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _rounds(args: argparse.Namespace, options: Options, arms: list[Arm]) -> int:
    path = args.json_path
    record = run_rounds(
        options,
        args.rounds,
        args.reference,
        log=_log,
        on_round=None if path is None else lambda so_far: write_json(path, so_far),
        catalog=arms,
    )
    for doc in record["docs"]:
        print(render(doc), end="\n\n")
    print(render_judgement(record["judgement"], args.reference))
    steady = render_steady(record["steady"], args.rounds, args.reference)
    if steady:
        print("\n" + steady)
    if path is not None:
        write_json(path, record)
    if args.store:
        for workdir in record["round_workdirs"]:
            store_in_console(Path(workdir))
    return 0


if __name__ == "__main__":
    # A SIGTERM unwinds like Ctrl-C: the engines and gateways stop with the run, and the record
    # of the rounds done so far is already on disk.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.exit(main())
