"""The experiment's command-line options, defined once for `manage.py headline` and
`python -m lab.headline` (which adds its own arms, rounds, how it finds the dev vLLM and
`--store`)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from console.bench.headline.catalog import arm_keys
from console.bench.headline.experiment import Options
from console.bench.headline.procs import VllmEngine
from console.bench.headline.workload import ENGINES

# The agent's supervisor starts the engine this much nicer than itself (gpu_agent.supervisor.
# DEFAULT_ENGINE_NICE; the console may not import it, tests/headline check they agree): the
# benchmark starts vLLM the same way, so the gateway and the load generator come first.
ENGINE_NICE = 10


def add_experiment_arguments(p: argparse.ArgumentParser, keys: str | None = None) -> None:
    """`keys`: the arms --arms may name (default: catalog.arm_keys())."""
    p.add_argument("--duration", type=float, default=60.0, help="measured seconds per arm")
    p.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds per arm")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--time-scale", type=float, default=1.0, help="simulator wall s per model s")
    p.add_argument("--rate", type=float, help="req/s; default: find the saturation point")
    p.add_argument("--load-factor", type=float, default=1.05, help="x saturation throughput")
    p.add_argument("--sweep-step", type=float, default=10.0, help="seconds per sweep step")
    p.add_argument("--search-trial", type=float, default=15.0, help="seconds per search trial")
    p.add_argument("--no-search", action="store_true", help="skip the search and arm (e)")
    p.add_argument(
        "--arms",
        default="abcde",
        help=f"a subset of {keys or arm_keys()}, run in the order given",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="sim",
        help="the simulator, or a real vLLM (--vllm-command, --vllm-model)",
    )
    p.add_argument("--workdir", type=Path, help="logs, configs, prompts (default: a temp dir)")
    p.add_argument("--json", dest="json_path", type=Path, help="write the whole record here")


def add_vllm_arguments(p: argparse.ArgumentParser) -> None:
    """How `--engine vllm` starts an engine: `COMMAND serve MODEL --host --port FLAGS`."""
    p.add_argument(
        "--vllm-command",
        default="vllm",
        help="the vLLM command (words split as a shell would), `vllm` on a vLLM node",
    )
    p.add_argument("--vllm-model", default="", help="the model vLLM serves (path or name)")
    p.add_argument(
        "--engine-cpus",
        default="",
        help="cores the engine keeps to (e.g. 0); the load generator and gateways avoid them",
    )
    p.add_argument(
        "--engine-nice",
        type=int,
        choices=range(20),
        default=ENGINE_NICE,
        metavar="N",
        help=f"start vLLM N steps nicer than the client and gateways, as the agent's "
        f"supervisor does (default {ENGINE_NICE}; 0: the same priority)",
    )


def check(args: argparse.Namespace, keys: str | None = None) -> str | None:
    """What is wrong with this combination of options (None: nothing); `keys`: the arms
    --arms may name (default: catalog.arm_keys())."""
    keys = keys or arm_keys()
    if set(args.arms) - set(keys) or not args.arms:
        return f"--arms {args.arms!r}: arms are named by the letters {keys}"
    if args.engine == "vllm" and "e" in args.arms and not args.no_search:
        return (
            "--engine vllm: the search starts a vLLM per trial (minutes each); "
            "add --no-search (or leave arm e out with --arms abcd)"
        )
    if args.engine != "vllm" and getattr(args, "vllm_model", ""):
        return "--vllm-model: only with --engine vllm"
    json_path = getattr(args, "json_path", None)
    if json_path is not None and not json_path.parent.is_dir():
        # found before the first engine starts, not after a run of an hour
        return f"--json {json_path}: no folder {json_path.parent} to write it in"
    return None


def vllm_from_args(args: argparse.Namespace) -> VllmEngine:
    if not args.vllm_model:
        raise ValueError("--vllm-model: required with --engine vllm")
    return VllmEngine(
        command=tuple(shlex.split(args.vllm_command)),
        model=args.vllm_model,
        engine_cpus=args.engine_cpus,
        nice=args.engine_nice,
    )


def options_from_args(
    args: argparse.Namespace, command: list[str], vllm: VllmEngine | None = None
) -> Options:
    """`vllm`: the engine when `--engine vllm` (default: from --vllm-command/--vllm-model)."""
    if args.engine == "vllm" and vllm is None:
        vllm = vllm_from_args(args)
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
        vllm=vllm if args.engine == "vllm" else None,
        workdir=args.workdir,
        command=command,
    )
