"""The lab's fronts beside the product's (console/bench/headline/procs.py): the gateway with more
of the agent's flags or from another revision's packages, the bare relay (lab/relay_floor.py)
and nginx as a pass-through. Each is a real process on 127.0.0.1, started and stopped by the
product's `process`, so it is waited for and torn down as the product's engines and gateways
are."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from console.bench.headline.procs import ROOT, free_port, gateway_argv, process

# What the gateway process runs: the agent and the scheduler core it imports (nothing else).
GATEWAY_PACKAGES = ("gpu_agent", "scheduler")


@contextlib.contextmanager
def run_gateway(
    engine_url: str,
    tier_config: dict[str, Any],
    workdir: Path,
    name: str,
    *,
    flags: Sequence[str] = (),
    source: Path = ROOT,
) -> Iterator[str]:
    """The product's gateway process (procs.gateway_argv) with more of the agent's
    command-line `flags`, its packages from `source` (gateway_source: another revision's)."""
    argv, url = gateway_argv(engine_url, tier_config, workdir, name)
    log = workdir / f"{name}-gateway.log"
    with process([*argv, *flags], log, url, 30, cwd=source) as u:
        yield u


def gateway_source(rev: str, dest: Path) -> Path:
    """The gateway's packages as at git revision `rev` of this checkout, written under `dest`
    (`git archive`), so that an arm runs that revision's gateway beside this one's in the same
    run. Raises ValueError naming `rev` when git does not know it."""
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, *GATEWAY_PACKAGES],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip()
        raise ValueError(f"--gateway-rev {rev}: {why or 'git archive failed'}")
    folder = dest / "gateway-rev"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder.resolve()


@contextlib.contextmanager
def run_relay(engine_url: str, workdir: Path, name: str) -> Iterator[str]:
    """The bare relay (`python -m lab.relay_floor`) in front of `engine_url`."""
    port = free_port()
    argv = [
        sys.executable, "-m", "lab.relay_floor",
        "--engine-url", engine_url,
        "--listen", f"127.0.0.1:{port}",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with process(argv, workdir / f"{name}-relay.log", url, 30) as u:
        yield u


# nginx as a pass-through: a compiled proxy, no scheduler; streams unbuffered both ways, one
# worker, keep-alive to the engine (as the gateway's pool), no access log.
NGINX_CONF = """worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    upstream engine {{ server {engine}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"""


@contextlib.contextmanager
def run_nginx(engine_url: str, workdir: Path, name: str) -> Iterator[str]:
    """nginx (Debian's) in the foreground as a pass-through to `engine_url`."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    folder = (workdir / f"{name}-nginx").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "nginx.conf"
    engine = engine_url.removeprefix("http://")
    conf.write_text(NGINX_CONF.format(dir=folder, engine=engine, port=port), encoding="utf-8")
    argv = [nginx, "-c", str(conf), "-p", str(folder), "-g", "daemon off;"]
    url = f"http://127.0.0.1:{port}"
    with process(argv, workdir / f"{name}-nginx.log", url, 30) as u:
        yield u
