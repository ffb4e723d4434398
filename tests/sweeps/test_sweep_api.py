"""REST API of sweeps without agents: create (good and bad input), roles, list filters,
cancel. What the executor does with a sweep is tested in its own files."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sweeps.api_helpers import WAIT, body, make_node

URL = "/api/v1/sweeps/"


@pytest.fixture
def setup(db: None) -> dict[str, Any]:
    return make_node()


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sweeps handed to the task queue (h19exec's enqueue replaced by a recorder)."""
    from console.bench.sweeps import tasks

    calls: list[int] = []
    monkeypatch.setattr(tasks, "enqueue", lambda sweep: calls.append(sweep.pk))
    return calls


def _written() -> tuple[int, int, int]:
    from console.audit.models import AuditEvent
    from console.bench.sweeps.models import Sweep, SweepTrial

    return (
        Sweep.objects.count(),
        SweepTrial.objects.count(),
        AuditEvent.objects.filter(object_type="bench.sweep").count(),
    )


def test_an_operator_creates_a_sweep_with_its_base_trial_and_it_is_queued_after_commit(
    api: Any,
    operator: Any,
    setup: dict[str, Any],
    enqueued: list[int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    from console.audit.models import AuditEvent
    from console.bench.sweeps.models import Sweep
    from console.bench.sweeps.spec import Variable

    with django_capture_on_commit_callbacks(execute=True):
        response = api(operator).post(URL, body(setup["node"]), format="json")
    assert response.status_code == 201, response.json()
    sweep = response.json()
    assert enqueued == [sweep["id"]]
    assert sweep["url"].endswith(f"{URL}{sweep['id']}/") and sweep["display"]
    assert sweep["status"] == {"value": "pending", "label": "Pending"}
    assert sweep["kind"]["value"] == "tier_config" and sweep["mode"]["value"] == "one"
    assert sweep["objective"]["value"] == "min_online_ttft_p99"
    assert sweep["endpoint"] == setup["endpoint"].pk  # the node's gateway, by default
    assert sweep["model"] == "sim-model"
    assert sweep["base_tier_config"] == setup["tiers"].pk and sweep["base_version"] == "tiers v1"
    assert sweep["trials_planned"] == 4 and sweep["repeats"] == 2
    assert sweep["variables"] == [{"path": WAIT, "values": [1, 5, 20]}]
    assert sweep["workload"]["tier_mix"] == {"online": 0.7, "batch": 0.3}
    assert "salt" not in sweep["workload"]  # each run gets its own
    assert sweep["constraints"] == {
        "min_throughput_rps": None,
        "max_error_rate": 0.01,
        "max_ttft_p99_ms": {"online": 500.0},
    }
    [base] = sweep["trials"]
    assert base["index"] == 0 and base["is_base"] and base["values"] == {}
    assert base["document"] == setup["tiers"].config
    assert base["tier_config"] == setup["tiers"].pk and base["status"]["value"] == "pending"
    assert base["url"].endswith(f"/api/v1/sweep-trials/{base['id']}/")
    stored = Sweep.objects.get(pk=sweep["id"]).spec()  # what the executor plans from
    assert stored.variables == (Variable(WAIT, (1, 5, 20)),) and stored.mode == "one"
    assert stored.constraints.max_ttft_p99_ms == {"online": 500.0}
    event = AuditEvent.objects.get(object_type="bench.sweep", object_id=str(sweep["id"]))
    assert event.action == "create" and event.actor == operator


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (
            {"variables": [{"path": "scheduler.queues.online.speed", "values": [1]}]},
            "variables[0].path",  # no such field: the path is wrong, not its value
            "speed",
        ),
        ({"variables": [{"path": WAIT, "values": [1, -5]}]}, "variables[0].values[1]", "> 0"),
        (
            {"variables": [{"path": "online.wait", "values": [1]}]},
            "variables[0].path",
            "under scheduler",
        ),
        (
            {"kind": "launch_profile", "variables": [{"path": "max_num_seqs", "values": [8]}]},
            "node",
            "no launch profile",
        ),
        ({"repeats": 11}, "repeats", "10"),
        ({"repeats": 0}, "repeats", "1"),
        (
            {"constraints": {"max_ttft_p99_ms": {"offline": 900}}},
            "constraints.max_ttft_p99_ms.offline",
            "no offline requests",
        ),
        ({"constraints": {"max_error_rate": 3}}, "constraints.max_error_rate", "between"),
        ({"workload": {"concurrency": -1, "requests": 5}}, "workload.concurrency", ""),
        ({"tier_profiles": {"online": {"weight": 0}}}, "tier_profiles.online.weight", "> 0"),
        ({"mode": "grid"}, "variables", "2 to 3"),
        ({"node": 999999}, "node", ""),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_written(
    api: Any, operator: Any, setup: dict[str, Any], change: dict[str, Any], field: str, words: str
) -> None:
    before = _written()
    response = api(operator).post(URL, body(setup["node"], **change), format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()
    assert field in errors, errors
    assert words in " ".join(errors[field])
    assert _written() == before


def test_an_endpoint_that_does_not_reach_the_node_is_refused(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    other = make_node("gpu-b")
    response = api(operator).post(
        URL, body(setup["node"], endpoint=other["endpoint"].pk), format="json"
    )
    assert response.status_code == 400
    assert "does not reach node gpu-a" in response.json()["endpoint"][0]


def test_a_node_takes_one_sweep_at_a_time(api: Any, operator: Any, setup: dict[str, Any]) -> None:
    assert api(operator).post(URL, body(setup["node"]), format="json").status_code == 201
    second = api(operator).post(URL, body(setup["node"]), format="json")
    assert second.status_code == 400
    assert "is under sweep" in second.json()["node"][0]


def test_a_launch_profile_sweep_starts_from_the_nodes_profile(api: Any, operator: Any) -> None:
    made = make_node("gpu-p", profile=True)
    response = api(operator).post(
        URL,
        body(
            made["node"],
            kind="launch_profile",
            mode="coordinate",
            variables=[
                {"path": "max_num_seqs", "values": [8, 64]},
                {"path": "max_num_batched_tokens", "values": [4096]},
            ],
        ),
        format="json",
    )
    assert response.status_code == 201, response.json()
    sweep = response.json()
    assert sweep["base_launch_profile"] == made["engine"].pk
    assert sweep["base_version"] == "engine v1" and sweep["trials_planned"] == 4
    assert sweep["trials"][0]["launch_profile"] == made["engine"].pk
    # vLLM refuses fewer batched tokens than sequences: refused now, not when the trial runs.
    bad = api(operator).post(
        URL,
        body(
            make_node("gpu-q", profile=True)["node"],
            kind="launch_profile",
            variables=[{"path": "max_num_seqs", "values": [64, 9000]}],
        ),
        format="json",
    )
    assert bad.status_code == 400
    assert "max_num_batched_tokens" in bad.json()["variables[0].values[1]"][0]


def test_viewers_read_but_cannot_create_or_cancel_and_outsiders_cannot_read(
    api: Any, operator: Any, viewer: Any, outsider: Any, setup: dict[str, Any]
) -> None:
    created = api(operator).post(URL, body(setup["node"]), format="json").json()
    before = _written()
    assert api(viewer).post(URL, body(setup["node"]), format="json").status_code == 403
    assert api(viewer).post(f"{URL}{created['id']}/cancel/").status_code == 403
    assert api(viewer).post(f"{URL}{created['id']}/adopt/", {"trial": 0}).status_code == 403
    assert _written() == before
    assert api(viewer).get(f"{URL}{created['id']}/").json()["id"] == created["id"]
    assert api(outsider).get(URL).status_code == 403
    assert api(None).get(URL).status_code in (401, 403)


def test_the_list_is_paginated_and_filters_by_status_and_node(
    api: Any, operator: Any, viewer: Any, setup: dict[str, Any]
) -> None:
    from console.bench.sweeps.models import Sweep

    other = make_node("gpu-b")
    first = api(operator).post(URL, body(setup["node"]), format="json").json()
    second = api(operator).post(URL, body(other["node"]), format="json").json()
    Sweep.objects.filter(pk=first["id"]).update(status="succeeded")
    client = api(viewer)
    listed = client.get(URL).json()
    assert listed["count"] == 2 and [s["id"] for s in listed["results"]] == [
        second["id"],
        first["id"],
    ]
    assert "trials" not in listed["results"][0]
    assert [s["id"] for s in client.get(URL, {"status": "pending"}).json()["results"]] == [
        second["id"]
    ]
    assert [s["id"] for s in client.get(URL, {"node": setup["node"].pk}).json()["results"]] == [
        first["id"]
    ]
    assert "status" in client.get(URL, {"status": "nope"}).json()
    assert client.get(URL, {"node": "x"}).status_code == 400
    trials = client.get("/api/v1/sweep-trials/", {"sweep": first["id"]}).json()
    assert [t["index"] for t in trials["results"]] == [0]


def test_cancelling_a_pending_sweep_ends_it_and_a_finished_one_is_a_409(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.audit.models import AuditEvent

    sweep = api(operator).post(URL, body(setup["node"]), format="json").json()
    response = api(operator).post(f"{URL}{sweep['id']}/cancel/")
    assert response.status_code == 202
    done = response.json()
    assert done["status"]["value"] == "cancelled" and done["restored"] is True
    assert done["trials"][0]["status"]["value"] == "cancelled"
    assert AuditEvent.objects.filter(
        object_type="bench.sweep", object_id=str(sweep["id"]), action="cancel"
    ).exists()
    again = api(operator).post(f"{URL}{sweep['id']}/cancel/")
    assert again.status_code == 409
    assert "already cancelled" in again.json()["status"][0]


def test_cancelling_a_running_sweep_asks_its_worker_to_stop(
    api: Any, operator: Any, setup: dict[str, Any]
) -> None:
    from console.bench.sweeps.models import Sweep

    sweep = api(operator).post(URL, body(setup["node"]), format="json").json()
    Sweep.objects.filter(pk=sweep["id"]).update(status="running")
    response = api(operator).post(f"{URL}{sweep['id']}/cancel/")
    assert response.status_code == 202
    shown = response.json()
    assert shown["status"]["value"] == "running" and shown["cancel_requested"] is True
    assert shown["restored"] is False  # the worker restores the base, then ends it


def test_the_schema_documents_the_sweep_endpoints(api: Any, viewer: Any) -> None:
    schema = api(None).get("/api/v1/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert {"/api/v1/sweeps/", "/api/v1/sweeps/{id}/cancel/", "/api/v1/sweeps/{id}/adopt/"} <= set(
        paths
    )
    assert "post" in paths["/api/v1/sweeps/"]


def test_the_admin_shows_sweeps_with_their_trials_read_only(
    api: Any, operator: Any, admin_user: Any, setup: dict[str, Any]
) -> None:
    from django.test import Client

    sweep = api(operator).post(URL, body(setup["node"]), format="json").json()
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    assert "online wait" in client.get("/admin/bench/sweep/").content.decode()
    assert client.get("/admin/bench/sweep/add/").status_code == 403
    change = client.get(f"/admin/bench/sweep/{sweep['id']}/change/")
    assert change.status_code == 200
    page = change.content.decode()
    assert "Save" not in page and "max_waiting_time_ms" in page


def test_a_node_a_sweep_keeps_cannot_be_deleted_and_nothing_is_written(
    api: Any, operator: Any, admin_user: Any, setup: dict[str, Any]
) -> None:
    from console.audit.models import AuditEvent
    from console.fleet.models import Node

    assert api(operator).post(URL, body(setup["node"]), format="json").status_code == 201
    node_id = setup["node"].pk
    events = AuditEvent.objects.count()
    response = api(admin_user).delete(f"/api/v1/nodes/{node_id}/")
    assert response.status_code == 409
    assert "cannot be deleted" in response.json()["node"][0]
    assert Node.objects.filter(pk=node_id).exists()
    assert AuditEvent.objects.count() == events
