"""schemathesis over the whole REST API (every operation of /api/v1/schema/) against a live
test server, as an admin: no input may make the console answer 5xx.

The run is reproducible and bounded: a fixed seed, the coverage phase (boundary and negative
values of every parameter and body field, the cases that found this issue's 500s) and the
fuzzing phase with at most MAX_EXAMPLES cases per operation. One object of each kind exists and
its id is used for the detail routes, so their bodies and query parameters are reached too;
ids themselves (ASCII digits in range) are checked in tests/foundation/test_ids.py.

The run holds its own token to the end: the token routes get a spare one (revoking the run's own
token made every later request a 401, so most of the API went untested while the run passed),
and the run fails on schemathesis' warning that operations answered only 401/403. One worker:
CPython 3.11.7's ast.parse is not thread-safe (gh-106905), and hypothesis parses lambdas'
source while it builds strategies in both workers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.accounts.models import ApiToken
from console.accounts.services import create_token

SEED = 20261201
MAX_EXAMPLES = 10
ROOT = Path(__file__).resolve().parents[2]
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


def _seed(admin: Any) -> tuple[dict[str, int], str]:
    """One object of each kind, {API path prefix: its id}, and the token of a node kept for
    the heartbeat (the fuzzed node's token is rotated by the run)."""
    from console.bench.services import create_run
    from console.fleet import gateway_keys
    from console.fleet import services as fleet
    from console.tuning.rollouts.services import create_rollout
    from console.tuning.services import create_launch_profile, create_tier_config
    from tests.rollouts.rollout_helpers import tier_config

    node, _ = fleet.create_node("fuzz-node", ["fuzz"], admin)
    # A closed port: the doctor and fetch-models fail at once instead of waiting on a host.
    endpoint = fleet.create_endpoint(
        admin, name="fuzz-endpoint", base_url="http://127.0.0.1:9/v1", models=["m"], kind="vllm"
    )
    key, _ = gateway_keys.create_gateway_key("fuzz-key", ["online"], "online", admin, check=False)
    tiers = create_tier_config(name="fuzz", config=tier_config(), message="v1")
    profile = create_launch_profile(name="fuzz", args={"model": "m", "max_num_seqs": 8})
    rollout = create_rollout(tier_config=tiers, stale_targets="include", user=admin, start=False)
    run = create_run(endpoint=endpoint, workload={"requests": 1}, user=admin, enqueue=False)
    from console.audit.models import AuditEvent
    from console.bench.sweeps.models import Sweep, SweepTrial

    # Written directly: create_sweep refuses a node under the unfinished rollout above.
    sweep = Sweep.objects.create(
        node=node,
        endpoint=endpoint,
        model="m",
        kind="tier_config",
        base_tier_config=tiers,
        variables=[{"path": "scheduler.queues.online.max_waiting_time_ms", "values": [1, 5]}],
        workload=run.workload,
        trials_planned=3,
        created_by=admin,
    )
    trial = SweepTrial.objects.create(
        sweep=sweep, index=0, is_base=True, document=tiers.config, tier_config=tiers
    )

    spare, _ = create_token(admin, "fuzz-spare")
    _, beat_token = fleet.create_node("fuzz-beat", ["fuzz"], admin)

    ids = {
        "api-tokens": spare.pk,
        "nodes": node.pk,
        "endpoints": endpoint.pk,
        "gateway-keys": key.pk,
        "tier-configs": tiers.pk,
        "launch-profiles": profile.pk,
        "rollouts": rollout.pk,
        "benchmarks": run.pk,
        "sweeps": sweep.pk,
        "sweep-trials": trial.pk,
        "audit-events": AuditEvent.objects.order_by("pk").values_list("pk", flat=True).first(),
    }
    return ids, beat_token


# fetch-models answers 502 when the endpoint's server fails (documented in the schema: the
# upstream's failure, not the console's); the seeded endpoint points at a closed port.
FETCH_MODELS = (
    "[[operations]]\n"
    'include-name = "POST /api/v1/endpoints/{{id}}/fetch-models/"\n'
    'parameters = {{ "path.id" = {pk} }}\n'
    'checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "502"]\n'
)

# The heartbeat takes a node's token, not a user's.
HEARTBEAT = (
    "[[operations]]\n"
    'include-name = "POST /api/v1/agent/heartbeat"\n'
    'headers = {{ Authorization = "Bearer {token}" }}\n'
)


def _config(ids: dict[str, int], beat_token: str) -> str:
    blocks = [FETCH_MODELS.format(pk=ids["endpoints"]), HEARTBEAT.format(token=beat_token)] + [
        f'[[operations]]\ninclude-path-regex = "^/api/v1/{prefix}/\\\\{{id\\\\}}/"\n'
        f'parameters = {{ "path.id" = {pk} }}\n'
        for prefix, pk in ids.items()
    ]
    # Unexpected HTTP methods (405s, DRF's own) are left out of the coverage phase: time.
    # Learning ids from responses is off: the ids are given above.
    phases = (
        "[phases.coverage]\nunexpected-methods = []\n"
        "[phases.coverage.extra-data-sources]\nresponses = false\n"
        "[phases.fuzzing.extra-data-sources]\nresponses = false\n"
    )
    return "\n".join([phases, *blocks])


@pytest.mark.timeout(1500)
def test_no_input_makes_the_api_answer_a_server_error(
    live_server: Any, admin_user: Any, tmp_path: Path
) -> None:
    ids, beat_token = _seed(admin_user)
    own, token_key = create_token(admin_user, "schemathesis")
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(ids, beat_token))
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{live_server.url}/api/v1/schema/",
        "--checks",
        "not_a_server_error",
        "--phases",
        "coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--header",
        f"Authorization: Bearer {token_key}",
        # A connection per request: on a kept-alive one, what the test server leaves unread of
        # a request (a POST sent with no Content-Length) is read as the next request, and the
        # 400 it gets is taken by the client for the answer to its next one.
        "--header",
        "Connection: close",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-12000:]
    assert "Selected: " in output and " passed" in output, output[-4000:]
    tested = int(output.split("Tested: ")[1].split()[0])
    assert tested >= 40, output[-4000:]  # the whole schema, not a few operations
    # Every operation was reached signed in, and the run's token outlived it.
    assert "Authentication failed" not in output, output[-12000:]
    assert ApiToken.objects.get(pk=own.pk).active
