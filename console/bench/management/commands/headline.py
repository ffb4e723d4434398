"""manage.py headline: run the headline experiment (issue 9; console/bench/headline/) and store
every arm as an ordinary benchmark run, so the compare page shows any two of them.

    python manage.py headline [--duration 60] [--no-search] [--engine sim|vllm] ...
    python manage.py headline --from-workdir DIR     # store a finished experiment's folder

It starts its own engines (`python -m gpu_agent.sim`, or `--vllm-command serve --vllm-model`)
and gateways (`python -m gpu_agent`) as subprocesses, so it runs wherever the product's
packages are: the checkout, or the Docker image.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from console.bench.headline.experiment import run_experiment
from console.bench.headline.options import (
    add_experiment_arguments,
    add_vllm_arguments,
    check,
    options_from_args,
)
from console.bench.headline.report import render
from console.bench.headline.store import StoreError, store_workdir


class Command(BaseCommand):
    help = (
        "Run the headline experiment (tiered scheduling vs FCFS) and store each arm as a "
        "benchmark run; --from-workdir stores a finished one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_experiment_arguments(parser)
        add_vllm_arguments(parser)
        parser.add_argument(
            "--from-workdir",
            type=Path,
            help="store the finished experiment in this folder (headline.json), run nothing",
        )
        parser.add_argument("--no-store", action="store_true", help="run and print, store nothing")

    def handle(self, *args: Any, **opts: Any) -> None:
        workdir = opts["from_workdir"]
        if workdir is None:
            workdir = self._run(opts)
            if opts["no_store"]:
                return
        try:
            runs = store_workdir(workdir, log=self.stdout.write)
        except StoreError as exc:
            raise CommandError(str(exc)) from exc
        if len(runs) >= 2:
            page = reverse("bench:compare")
            self.stdout.write(
                f"compare the first and last arm: {page}?a={runs[0].pk}&b={runs[-1].pk}"
            )

    def _run(self, opts: dict[str, Any]) -> Path:
        args = Namespace(**opts)
        problem = check(args)
        if problem:
            raise CommandError(problem)
        # The command line as typed (call_command from code records only the command's name).
        argv = sys.argv[2:] if sys.argv[1:2] == ["headline"] else []
        try:
            options = options_from_args(args, [sys.executable, "manage.py", "headline", *argv])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        experiment = run_experiment(options, log=self.stderr.write)
        self.stdout.write(render(experiment.doc))
        if opts["json_path"] is not None:
            opts["json_path"].write_text(json.dumps(experiment.doc, indent=2), encoding="utf-8")
        return Path(experiment.doc["workdir"])
