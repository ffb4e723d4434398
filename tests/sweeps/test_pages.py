"""The sweep pages: the list, the form (its errors next to the field that caused them), the
detail page with trials, charts and the best trial's verdict, the live fragment, cancel and
adopt, and what a viewer may not do."""

from __future__ import annotations

import json
import re
from typing import Any

from django.test import Client
from django.utils import timezone

from console.bench.sweeps.choices import SweepStatus
from console.bench.sweeps.models import Sweep
from console.fleet import services as fleet_services
from console.fleet.models import Node
from console.tuning.rollouts.models import Rollout
from tests.sweeps.ui_data import PATH, finished_sweep, node_with_versions


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _form(node: Any, **overrides: Any) -> dict[str, Any]:
    data = {
        "node": node.pk,
        "kind": "tier_config",
        "mode": "one",
        "var1_path": PATH,
        "var1_values": "1, 5, 10",
        "preset": "mixed-tiers",
        "repeats": 2,
        "max_ttft_p99_ms": "online=500",
        "max_error_rate": "0.01",
        "objective": "min_online_ttft_p99",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def _field_error(html: str, field: str) -> str:
    match = re.search(rf'<div class="error" id="error-{field}">(.*?)</div>', html, re.S)
    assert match, f"no error shown next to {field}"
    return re.sub(r"<[^>]+>", " ", match[1])


def test_the_list_shows_each_sweep_with_its_progress_and_best_trial(db: None, viewer: Any) -> None:
    node = node_with_versions()
    done = finished_sweep(node, with_runs=False)
    running = finished_sweep(node, status=SweepStatus.RUNNING, with_runs=False)
    html = _client(viewer).get("/benchmarks/sweeps/").content.decode()
    assert f'href="/benchmarks/sweeps/{done.pk}/"' in html
    assert f'href="/benchmarks/sweeps/{running.pk}/"' in html
    assert "5 / 5" in html and "2 / 5" in html
    assert f"#1 {PATH}=1" in html  # the finished sweep's best trial
    assert PATH in html and "sweep-node" in html
    assert 'id="new-sweep"' not in html  # a viewer starts nothing
    only_running = _client(viewer).get("/benchmarks/sweeps/", {"status": "running"})
    assert f"/benchmarks/sweeps/{done.pk}/" not in only_running.content.decode()


def test_the_nav_links_to_sweeps(db: None, viewer: Any) -> None:
    html = _client(viewer).get("/benchmarks/sweeps/").content.decode()
    assert re.search(r'<a href="/benchmarks/sweeps/" class="active"[^>]*>Sweeps</a>', html)


def test_the_form_offers_nodes_with_a_version_and_the_base_configs_numeric_fields(
    db: None, operator: Any
) -> None:
    node = node_with_versions()
    bare, _ = fleet_services.create_node("bare", [], None)
    html = _client(operator).get("/benchmarks/sweeps/new/", {"node": node.pk}).content.decode()
    assert f'value="{node.pk}"' in html and f'value="{bare.pk}"' not in html
    assert f'data-tier-config="{node.desired_tier_config.label}"' in html
    assert f'data-launch-profile="{node.desired_launch_profile.label}"' in html
    datalist = re.search(rf'<datalist id="sweep-paths-tc-{node.pk}">(.*?)</datalist>', html, re.S)
    assert datalist and f'value="{PATH}"' in datalist[1]
    assert 'value="scheduler.queues.batch.max_batch_size"' in datalist[1]
    assert "scheduler.adaptive.enabled" not in datalist[1]  # a boolean, not a number
    launch = re.search(r'<datalist id="sweep-paths-lp">(.*?)</datalist>', html, re.S)
    assert launch and 'value="max_num_seqs"' in launch[1] and 'value="model"' not in launch[1]
    assert f'<option value="{node.pk}" data-tier-config' in html.replace(" selected", "")


def test_an_operator_starts_a_sweep_from_the_form(db: None, operator: Any) -> None:
    node = node_with_versions()
    response = _client(operator).post("/benchmarks/sweeps/new/", _form(node))
    sweep = Sweep.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/benchmarks/sweeps/{sweep.pk}/"
    assert sweep.variables == [{"path": PATH, "values": [1, 5, 10]}]
    assert sweep.constraints["max_ttft_p99_ms"] == {"online": 500.0}
    assert sweep.constraints["max_error_rate"] == 0.01
    assert sweep.repeats == 2 and sweep.preset == "mixed-tiers"
    assert sweep.base_tier_config_id == node.desired_tier_config_id
    assert sweep.trials.get().is_base


def test_a_custom_workload_uses_the_run_forms_fields(db: None, operator: Any) -> None:
    node = node_with_versions()
    response = _client(operator).post(
        "/benchmarks/sweeps/new/",
        _form(
            node,
            preset="",
            load="concurrency",
            concurrency=6,
            requests=30,
            prompt_tokens=64,
            max_tokens=16,
            tier_mix="online=0.8,batch=0.2",
        ),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    workload = Sweep.objects.get().workload
    assert workload["concurrency"] == 6 and workload["requests"] == 30
    assert workload["tier_mix"] == {"online": 0.8, "batch": 0.2}


def test_errors_show_next_to_the_field_that_caused_them(db: None, operator: Any) -> None:
    node = node_with_versions(profile=False)
    client = _client(operator)
    cases = [
        # The service refuses a value the scheduler's schema refuses: variables[0].values[1].
        (_form(node, var1_values="5, -3"), "var1_values", "value -3: scheduler.queues"),
        (_form(node, var1_path="scheduler.nowhere"), "var1_path", "not a field of the base"),
        (_form(node, var1_path="nope"), "var1_path", "dotted path"),
        (_form(node, var1_values=""), "var1_values", "required"),
        (_form(node, mode="grid"), "mode", "2 to 3 variables"),
        (_form(node, max_ttft_p99_ms="online:500"), "max_ttft_p99_ms", "tier=milliseconds"),
        (_form(node, max_ttft_p99_ms="offline=500", preset="smoke"), "max_ttft_p99_ms", "no"),
        (_form(node, preset="smoke", max_ttft_p99_ms=""), "objective", "no online requests"),
        (_form(node, kind="launch_profile", var1_path="max_num_seqs"), "node", "launch profile"),
        (_form(node, repeats=11), "repeats", "10"),
        (_form(node, preset="", prompt_tokens=None), "prompt_tokens", "custom workload"),
        (_form(node, preset="", prompt_tokens=8, max_tokens=8, rate=None, load="rate"), "rate", ""),
    ]
    for data, field, words in cases:
        response = client.post("/benchmarks/sweeps/new/", data)
        html = response.content.decode()
        assert response.status_code == 400, (field, data)
        assert words in _field_error(html, field), (field, _field_error(html, field))
    assert not Sweep.objects.exists()


def test_the_detail_page_shows_trials_charts_verdict_and_adopt_buttons(
    db: None, operator: Any
) -> None:
    node = node_with_versions()
    sweep = finished_sweep(node)
    trials = {t.index: t for t in sweep.trials.all()}
    html = _client(operator).get(f"/benchmarks/sweeps/{sweep.pk}/").content.decode()
    rows = re.findall(r'<tr data-trial="(\d+)" data-feasible="(\w+)"', html)
    assert rows == [("0", "yes"), ("1", "yes"), ("2", "yes"), ("3", "no"), ("4", "no")]
    assert "online TTFT P99 900 ms &gt; cap 500 ms" in html
    assert f'<code title="{PATH}=10">online.max_waiting_time_ms=10</code>' in html
    # Every trial's runs are linked, and each trial compares with the base.
    for trial in trials.values():
        for run in trial.series.runs.all():
            assert f'href="/benchmarks/{run.pk}/"' in html
    base, best = trials[0].series_id, trials[1].series_id
    assert f'href="/benchmarks/compare/?a=s{base}&amp;b=s{best}"' in html
    # Adopt: the feasible trials other than the base, each behind a confirmation.
    assert re.findall(r'id="adopt-(\d+)"', html) == ["1", "2"]
    assert html.count('class="inline adopt" data-confirm="Adopt trial') == 2
    assert 'id="cancel-sweep"' not in html  # finished
    # The best trial's verdict against the base, with intervals, and its compare link.
    verdict = html[html.index('id="best-verdict"') :]
    assert f'id="best-compare" href="/benchmarks/compare/?a=s{base}&amp;b=s{best}"' in verdict
    assert 'id="verdicts"' in verdict and "ttft_p99" in verdict and "[" in verdict
    figures = json.loads(re.search(r'id="sweep-figures"[^>]*>(.*?)</script>', html, re.S)[1])
    assert set(figures) == {"pareto-latency", "pareto-tokens"}
    assert "/static/vendor/plotly.min.js" in html and "cdn" not in html.lower()


def test_the_live_fragment_shows_progress_and_eta_while_running(db: None, operator: Any) -> None:
    node = node_with_versions()
    sweep = finished_sweep(node, status=SweepStatus.RUNNING, with_runs=False)
    client = _client(operator)
    page = client.get(f"/benchmarks/sweeps/{sweep.pk}/").content.decode()
    assert f'data-live-url="/benchmarks/sweeps/{sweep.pk}/live/"' in page
    live = client.get(f"/benchmarks/sweeps/{sweep.pk}/live/").content.decode()
    assert "2 / 5 trials" in live and "ETA about 4 min 10 s" in live
    assert 'id="cancel-sweep"' in live and "data-confirm=" in live
    assert "data-live-done" not in live and 'id="adopt-' not in live
    Sweep.objects.filter(pk=sweep.pk).update(status=SweepStatus.CANCELLED, restored=True)
    assert "data-live-done" in client.get(f"/benchmarks/sweeps/{sweep.pk}/live/").content.decode()


def test_a_viewer_sees_no_buttons_and_may_not_post(db: None, viewer: Any) -> None:
    node = node_with_versions()
    running = finished_sweep(node, status=SweepStatus.RUNNING, with_runs=False)
    done = finished_sweep(node, with_runs=False)
    client = _client(viewer)
    for sweep in (running, done):
        html = client.get(f"/benchmarks/sweeps/{sweep.pk}/").content.decode()
        assert 'id="cancel-sweep"' not in html and 'id="adopt-' not in html
    assert client.get("/benchmarks/sweeps/new/").status_code == 403
    assert client.post("/benchmarks/sweeps/new/", _form(node)).status_code == 403
    assert client.post(f"/benchmarks/sweeps/{running.pk}/cancel/").status_code == 403
    trial = done.trials.get(index=1)
    assert (
        client.post(f"/benchmarks/sweeps/{done.pk}/adopt/", {"trial": trial.pk}).status_code == 403
    )
    assert not Sweep.objects.filter(cancel_requested=True).exists()
    assert not Rollout.objects.exists()


def test_cancel_asks_a_running_sweep_to_stop(db: None, operator: Any) -> None:
    node = node_with_versions()
    sweep = finished_sweep(node, status=SweepStatus.RUNNING, with_runs=False)
    response = _client(operator).post(f"/benchmarks/sweeps/{sweep.pk}/cancel/")
    assert response.status_code == 302 and response["Location"] == f"/benchmarks/sweeps/{sweep.pk}/"
    assert Sweep.objects.get(pk=sweep.pk).cancel_requested


def test_adopt_opens_a_rollout_and_goes_there(db: None, operator: Any) -> None:
    node = node_with_versions()
    Node.objects.filter(pk=node.pk).update(last_seen_at=timezone.now())
    sweep = finished_sweep(node, with_runs=False)
    trial = sweep.trials.get(index=2)  # undecided against the base: adopted only if confirmed
    url = f"/benchmarks/sweeps/{sweep.pk}/adopt/"
    _client(operator).post(url, {"trial": trial.pk})
    assert not Rollout.objects.exists()
    response = _client(operator).post(url, {"trial": trial.pk, "confirm_undecided": "1"})
    rollout = Rollout.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/tuning/rollouts/{rollout.pk}/"
    assert f"sweep #{sweep.pk} trial 2" in rollout.tier_config.message
    sweep.refresh_from_db()
    assert sweep.adopted_trial_id == trial.pk and sweep.adopted_rollout_id == rollout.pk
    html = _client(operator).get(f"/benchmarks/sweeps/{sweep.pk}/").content.decode()
    assert f'href="/tuning/rollouts/{rollout.pk}/"' in html and 'id="adopt-' not in html


def test_an_adoption_the_service_refuses_says_why_on_the_page(db: None, operator: Any) -> None:
    node = node_with_versions()  # never seen: a rollout refuses it
    sweep = finished_sweep(node, with_runs=False)
    client = _client(operator)
    response = client.post(
        f"/benchmarks/sweeps/{sweep.pk}/adopt/", {"trial": sweep.trials.get(index=1).pk}
    )
    assert response["Location"] == f"/benchmarks/sweeps/{sweep.pk}/"
    html = client.get(response["Location"]).content.decode()
    assert "stale_targets" in html and "never seen" in html
    infeasible = sweep.trials.get(index=3)
    client.post(f"/benchmarks/sweeps/{sweep.pk}/adopt/", {"trial": infeasible.pk})
    assert not Rollout.objects.exists()


def test_a_nodes_page_links_to_a_sweep_of_it(db: None, operator: Any, viewer: Any) -> None:
    node = node_with_versions()
    html = _client(operator).get(f"/fleet/nodes/{node.pk}/").content.decode()
    assert f'id="sweep-node" href="/benchmarks/sweeps/new/?node={node.pk}"' in html
    assert 'id="sweep-node"' not in _client(viewer).get(f"/fleet/nodes/{node.pk}/").content.decode()
    form = _client(operator).get(f"/benchmarks/sweeps/new/?node={node.pk}").content.decode()
    assert re.search(rf'<option value="{node.pk}"[^>]*selected', form)
