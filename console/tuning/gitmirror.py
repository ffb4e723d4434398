"""Mirror every tier config and launch profile version to a Git repository, one commit per
version, so teams that review configuration in Git see every change there.

Configured by `TIERGATE_GIT_MIRROR` (a path: a working repository, created when missing),
optionally `TIERGATE_GIT_MIRROR_PUSH` (a remote name or URL pushed to after each sync) and
`TIERGATE_GIT_MIRROR_QUEUE` (the Celery queue of the task: with several workers on several
machines, the one worker started with `-Q celery,QUEUE` holds the repository).
Creating a version schedules the `tuning.mirror_to_git` Celery task once its transaction
commits (services.py, tasks.schedule_mirror); the task runs `sync`.

`sync` is idempotent and catches up: every commit carries a `Tiergate-Version: KIND:ID`
trailer, and a sync commits, in creation order, each version whose trailer the repository does
not hold yet. A file lock serialises syncs on one machine, so two workers never commit one
version twice. Author, date and message come from the version's audit row (who created it,
when, and why); the committer is Tiergate. The git CLI does the work (no library needed).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from console.audit.choices import Action
from console.audit.models import AuditEvent
from console.tuning.configmaps import kind_of, mirror_path, render_configmap
from console.tuning.models import LaunchProfileVersion, TierConfigVersion, VersionedDocument

log = logging.getLogger(__name__)

TRAILER = "Tiergate-Version"
COMMITTER = {"GIT_COMMITTER_NAME": "Tiergate", "GIT_COMMITTER_EMAIL": "tiergate@localhost"}
NO_EMAIL_DOMAIN = "tiergate.invalid"


class MirrorError(RuntimeError):
    """A git command failed; the message holds its output."""


def git(
    repo: Path, *args: str, env: dict[str, str] | None = None, input_text: str | None = None
) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=60,
        # No user or system config may change what is written (hooks, signing, templates).
        env={
            **os.environ,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            **COMMITTER,
            **(env or {}),
        },
    )
    if result.returncode != 0:
        raise MirrorError(f"git {' '.join(args)}: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def ensure_repo(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    if not (repo / ".git").exists():
        git(repo, "init", "--quiet", "--initial-branch", "main")


@contextlib.contextmanager
def locked(repo: Path) -> Iterator[None]:
    with open(repo / ".git" / "tiergate-mirror.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def mirrored(repo: Path) -> set[str]:
    """KIND:ID of every version the repository already holds."""
    try:
        git(repo, "rev-parse", "--verify", "--quiet", "HEAD")
    except MirrorError:
        return set()  # no commit yet
    out = git(repo, "log", f"--format=%(trailers:key={TRAILER},valueonly)")
    return {line.strip() for line in out.splitlines() if line.strip()}


def version_key(obj: VersionedDocument) -> str:
    return f"{kind_of(obj)}:{obj.pk}"


def pending(done: set[str]) -> list[VersionedDocument]:
    """Versions not mirrored yet, oldest first (both kinds interleaved as they were made)."""
    versions: list[VersionedDocument] = [
        *TierConfigVersion.objects.select_related("author"),
        *LaunchProfileVersion.objects.select_related("author"),
    ]
    versions = [v for v in versions if version_key(v) not in done]
    return sorted(versions, key=lambda v: (v.created_at, kind_of(v), v.pk))


def _creation(obj: VersionedDocument) -> AuditEvent | None:
    event: AuditEvent | None = (
        AuditEvent.objects.select_related("actor")
        .filter(
            action=Action.CREATE,
            object_type=obj._meta.label_lower,
            object_id=str(obj.pk),
        )
        .order_by("id")
        .first()
    )
    return event


def commit_version(repo: Path, obj: VersionedDocument) -> None:
    event = _creation(obj)
    name = event.actor_name if event is not None else "system"
    actor = event.actor if event is not None else obj.author
    email = (actor.email if actor is not None else "") or f"{name}@{NO_EMAIL_DOMAIN}"
    message = event.message if event is not None else obj.message
    when = (event.created_at if event is not None else obj.created_at).isoformat()
    path = mirror_path(obj)
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_configmap(obj, author=name))
    git(repo, "add", "--", path)
    subject = f"{obj.label}: {message}" if message else obj.label
    body = f"{subject}\n\n{TRAILER}: {version_key(obj)}\n"
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": when}
    # --allow-empty: a version identical to the one before is still a version.
    git(
        repo,
        "commit",
        "--quiet",
        "--allow-empty",
        "--no-verify",
        "-F",
        "-",
        env=env,
        input_text=body,
    )


def sync(repo: Path, push: str = "") -> list[str]:
    """Commit every version the repository lacks; returns their labels. Pushes to `push`
    (a remote name or URL) when given and anything was committed or is unpushed."""
    ensure_repo(repo)
    with locked(repo):
        committed = []
        for obj in pending(mirrored(repo)):
            commit_version(repo, obj)
            committed.append(obj.label)
        if push and mirrored(repo):
            git(repo, "push", "--quiet", push, "HEAD:refs/heads/main")
    if committed:
        log.info("git mirror %s: committed %s", repo, ", ".join(committed))
    return committed


def sync_configured() -> list[str]:
    """`sync` on the configured repository (TIERGATE_GIT_MIRROR); nothing when unset."""
    if not settings.TIERGATE_GIT_MIRROR:
        return []
    return sync(Path(settings.TIERGATE_GIT_MIRROR), settings.TIERGATE_GIT_MIRROR_PUSH)
