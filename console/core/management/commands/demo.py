"""manage.py demo: migrate, create the demo admin, seed demo data, then run every process of
the embedded demo in the foreground until Ctrl-C, which stops them all."""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from console.core.demo import DemoContext, ProcessSpec, process_specs, run_seeders
from console.core.roles import ensure_role_groups

TAIL_LINES = 20


def _tail(path: Path) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
    return "\n".join(f"    | {line}" for line in lines) + f"\n    (whole log: {path})"


class Command(BaseCommand):
    help = (
        "Run the whole product on embedded defaults (console, worker, agents, simulated engines)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("TIERGATE_DEMO_HOST", "127.0.0.1"))
        parser.add_argument(
            "--port", type=int, default=int(os.environ.get("TIERGATE_DEMO_PORT", "8000"))
        )
        parser.add_argument(
            "--no-processes", action="store_true", help="set up only, start nothing"
        )
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="show every process's output here instead of in data/logs/",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        ensure_role_groups()
        admin, password = self._demo_admin()
        ctx = DemoContext(
            host=opts["host"], port=opts["port"], data_dir=settings.DATA_DIR, admin=admin
        )
        notes = run_seeders(ctx)
        login = [
            f"Tiergate demo: {ctx.console_url}/",
            f"  sign in as: admin / {password}   (saved in {settings.DATA_DIR / 'demo-admin.txt'})",
        ]
        self.stdout.write(self.style.SUCCESS(login[0]))
        self.stdout.write(login[1])
        for note in notes:
            self.stdout.write(f"  {note}")
        if opts["no_processes"]:
            return
        log_dir = None if opts["verbose"] else settings.DATA_DIR / "logs"
        self._run(process_specs(ctx), login, log_dir)

    def _demo_admin(self) -> tuple[Any, str]:
        User = get_user_model()
        secret_file = settings.DATA_DIR / "demo-admin.txt"
        admin = User.objects.filter(username="admin").first()
        if admin is not None and secret_file.exists():
            return admin, secret_file.read_text(encoding="utf-8").strip()
        password = secrets.token_urlsafe(9)
        if admin is None:
            admin = User.objects.create_superuser("admin", "admin@localhost", password)
        else:
            admin.set_password(password)
            admin.save()
        secret_file.write_text(password + "\n", encoding="utf-8")
        secret_file.chmod(0o600)
        return admin, password

    def _run(self, specs: list[ProcessSpec], login: list[str], log_dir: Path | None) -> None:
        """Start every process and wait. With a `log_dir`, each process writes to a file of
        its own there (heartbeat access lines would otherwise bury the sign-in), and this
        terminal shows only starts, stops, failures and, last, the sign-in again."""
        logging.getLogger("httpx").setLevel(logging.WARNING)  # our own readiness polls
        procs: list[tuple[ProcessSpec, subprocess.Popen[bytes]]] = []
        logs: dict[str, Path] = {}
        stopping = False

        def stop(*_: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
            for spec in specs:
                env = {**os.environ, **spec.env}
                out: Any = None
                if log_dir is not None:
                    logs[spec.name] = log_dir / (
                        re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.name) + ".log"
                    )
                    out = logs[spec.name].open("wb")
                # Own process group: Ctrl-C reaches us once and we stop children in order.
                proc = subprocess.Popen(
                    spec.argv,
                    env=env,
                    start_new_session=True,
                    stdout=out,
                    stderr=subprocess.STDOUT if out is not None else None,
                )
                if out is not None:
                    out.close()  # the child holds its own descriptor
                procs.append((spec, proc))
                self.stdout.write(f"  started {spec.name} (pid {proc.pid})")
                if spec.ready_url:
                    self._wait_ready(spec, proc)
            where = f"; their output is in {log_dir}/" if log_dir is not None else ""
            self.stdout.write(
                self.style.SUCCESS(f"All processes up{where}. Ctrl-C stops them all.")
            )
            self.stdout.write(self.style.SUCCESS(login[0]))
            for line in login[1:]:
                self.stdout.write(line)
            while not stopping:
                for spec, proc in procs:
                    if proc.poll() is not None:
                        self.stderr.write(
                            f"{spec.name} exited with code {proc.returncode}; stopping the demo"
                        )
                        if spec.name in logs:
                            self.stderr.write(_tail(logs[spec.name]))
                        stopping = True
                        break
                time.sleep(0.5)
        finally:
            self._stop_all(procs)

    def _wait_ready(self, spec: ProcessSpec, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(spec.ready_url or "", timeout=2).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stderr.write(f"{spec.name} did not become ready at {spec.ready_url}")

    def _stop_all(self, procs: list[tuple[ProcessSpec, subprocess.Popen[bytes]]]) -> None:
        # SIGTERM to each leader only: the worker then stops its own pool children and the
        # agents their engines, cleanly. The whole group is killed only if that times out.
        for _spec, proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 15
        for spec, proc in reversed(procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            self.stdout.write(f"  stopped {spec.name}")
