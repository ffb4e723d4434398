"""Every config version lands in a Git repository as one commit, with the audit's author and
message; syncing again commits nothing; a real worker mirrors each version as it is created."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from console.tuning import gitmirror, services
from console.tuning.configmaps import render_configmap
from tests.production.workers import discard, start_worker


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def log(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%an <%ae>|%s").splitlines()


def test_each_version_is_one_commit_with_the_audit_author_and_message(
    tmp_path: Path,
    operator: Any,
    admin_user: Any,
    seed_tiers: dict[str, Any],
    profile_args: dict[str, Any],
) -> None:
    repo = tmp_path / "mirror"
    v1 = services.create_tier_config(name="prod", config=seed_tiers, message="seed", user=operator)
    changed = yaml.safe_load(yaml.safe_dump(seed_tiers))
    changed["scheduler"]["queues"]["online"]["max_batch_size"] = 4
    v2 = services.create_tier_config(name="prod", config=changed, message="smaller", user=operator)
    lp = services.create_launch_profile(name="llama", args=profile_args, user=admin_user)

    assert gitmirror.sync(repo) == ["prod v1", "prod v2", "llama v1"]
    assert log(repo) == [
        "ada <ada@example.com>|llama v1",
        "otto <otto@example.com>|prod v2: smaller",
        "otto <otto@example.com>|prod v1: seed",
    ]
    assert git(repo, "show", "HEAD~2:tier-configs/prod.yaml") == render_configmap(v1, author="otto")
    assert git(repo, "show", "HEAD~1:tier-configs/prod.yaml") == render_configmap(v2, author="otto")
    assert (repo / "launch-profiles" / "llama.yaml").read_text() == render_configmap(
        lp, author="ada"
    )
    diff = git(repo, "diff", "HEAD~2", "HEAD~1")
    changes = [line.replace(" ", "") for line in diff.splitlines() if line[:1] in "+-"]
    # The JSON shows as lines of its own: the one changed field is one line out, one in.
    assert '-"max_batch_size":8,' in changes and '+"max_batch_size":4,' in changes
    assert len([c for c in changes if "max_batch_size" in c]) == 2
    trailers = git(repo, "log", "--format=%(trailers:key=Tiergate-Version,valueonly)").split()
    assert trailers == [f"launch-profile:{lp.pk}", f"tier-config:{v2.pk}", f"tier-config:{v1.pk}"]
    # The committer is Tiergate; the author's date is the version's.
    assert git(repo, "log", "-1", "--format=%cn").strip() == "Tiergate"

    assert gitmirror.sync(repo) == []
    assert len(log(repo)) == 3
    v3 = services.create_tier_config(name="prod", config=seed_tiers, user=None)
    assert gitmirror.sync(repo) == [v3.label]
    assert log(repo)[0] == "system <system@tiergate.invalid>|prod v3"


def test_a_sync_pushes_to_the_configured_remote(
    tmp_path: Path, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    services.create_tier_config(name="prod", config=seed_tiers, message="seed", user=operator)
    gitmirror.sync(tmp_path / "mirror", push=str(remote))
    assert git(remote, "log", "--format=%s", "main").splitlines() == ["prod v1: seed"]


def test_a_broken_repository_is_a_clear_error(
    tmp_path: Path, operator: Any, seed_tiers: Any
) -> None:
    services.create_tier_config(name="prod", config=seed_tiers, user=operator)
    with pytest.raises(gitmirror.MirrorError, match="push"):
        gitmirror.sync(tmp_path / "mirror", push=str(tmp_path / "no-such-remote"))


@pytest.mark.slow
def test_a_worker_mirrors_each_version_when_it_is_created(
    transactional_db: None,
    tmp_path: Path,
    settings: Any,
    api: Any,
    operator: Any,
    seed_tiers: dict[str, Any],
) -> None:
    repo = tmp_path / "mirror"
    queue = f"gitmirror-test-{time.monotonic_ns()}"
    settings.TIERGATE_GIT_MIRROR = str(repo)
    settings.TIERGATE_GIT_MIRROR_QUEUE = queue
    worker = start_worker("mirror", [queue], tmp_path, env={"TIERGATE_GIT_MIRROR": str(repo)})
    try:
        worker.wait_ready()
        client = api(operator)
        for message in ("first", "second"):
            body = {"name": "prod", "message": message, "config": seed_tiers}
            assert client.post("/api/v1/tier-configs/", body, format="json").status_code == 201
        deadline = time.monotonic() + 30
        while not (repo / ".git").exists() or len(subjects := _subjects(repo)) < 2:
            assert time.monotonic() < deadline, worker.output()
            time.sleep(0.2)
        assert subjects == ["prod v2: second", "prod v1: first"]
    finally:
        discard([worker])


def _subjects(repo: Path) -> list[str]:
    result = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True
    )
    return result.stdout.splitlines() if result.returncode == 0 else []
