"""The run page's rough edges, mended: facts that fill in while a run goes on, one unit per
figure, JSON rather than Python's dict text, titled chart axes, presets that say what they
run, and one load shape per custom run."""

from __future__ import annotations

from typing import Any

from django.test import Client
from django.utils import timezone

from console.bench import charts
from console.bench.choices import RunStatus
from console.bench.models import BenchmarkRun
from tests.bench.conftest import stored_run


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_started_and_the_snapshot_fill_in_without_a_reload(
    plain_endpoint: Any, viewer: Any
) -> None:
    run = BenchmarkRun.objects.create(
        endpoint=plain_endpoint, model="m1", status=RunStatus.PENDING, workload={"requests": 5}
    )
    client = _client(viewer)
    page = client.get(f"/benchmarks/{run.pk}/").content.decode()
    assert f'data-live-url="/benchmarks/{run.pk}/info/"' in page
    BenchmarkRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        started_at=timezone.now(),
        config_snapshot={"nodes": [{"name": "gpu-9", "engine": {"args": {"max_num_seqs": 7}}}]},
        current_p99_ttft_s=0.1234,
    )
    fragment = client.get(f"/benchmarks/{run.pk}/info/").content.decode()
    assert "gpu-9" in fragment and '"max_num_seqs": 7' in fragment.replace("&quot;", '"')
    assert "<time" in fragment and "data-live-done" not in fragment
    progress = client.get(f"/benchmarks/{run.pk}/progress/").content.decode()
    assert "current TTFT P99 123 ms" in progress
    BenchmarkRun.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED, finished_at=timezone.now()
    )
    assert "data-live-done" in client.get(f"/benchmarks/{run.pk}/info/").content.decode()


def test_workloads_show_as_json(plain_endpoint: Any, viewer: Any) -> None:
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=20)
    page = _client(viewer).get(f"/benchmarks/{run.pk}/").content.decode()
    workload = page.split("<summary>Workload</summary>", 1)[1].split("</pre>", 1)[0]
    assert "&quot;concurrency&quot;: 8" in workload and "&#x27;" not in workload


def test_the_throughput_chart_names_both_axes(plain_endpoint: Any) -> None:
    run = stored_run(plain_endpoint, ttft_scale=0.1, n=20)
    layout = charts.timeline_figure(run).to_plotly_json()["layout"]
    assert layout["yaxis"]["title"]["text"] == "requests/s"
    assert layout["yaxis2"]["title"]["text"] == "output tokens/s"
    assert layout["yaxis3"]["title"]["text"] == "ms"


def test_presets_say_what_they_run(plain_endpoint: Any, operator: Any) -> None:
    html = _client(operator).get("/benchmarks/").content.decode()
    visible = html.split('class="preset-list"', 1)[1].split("</ul>", 1)[0]
    assert "concurrency 24 for 20 s" in visible and "20 short requests at concurrency 4" in visible


def _custom(endpoint: Any, **fields: Any) -> dict[str, Any]:
    return {
        "endpoint": endpoint.pk,
        "requests": 10,
        "prompt_tokens": 16,
        "max_tokens": 4,
        "shared_prefix_tokens": 0,
        "arrival": "poisson",
        "stream": "on",
        **fields,
    }


def test_a_custom_run_takes_one_load_shape(plain_endpoint: Any, operator: Any) -> None:
    client = _client(operator)
    both = client.post("/benchmarks/new/", _custom(plain_endpoint, concurrency=8, rate=5))
    assert both.status_code == 200 and "load" in both.context["form"].errors
    assert "not concurrency and rate" in str(both.context["form"].errors["load"])
    missing = client.post("/benchmarks/new/", _custom(plain_endpoint, load="rate", concurrency=8))
    assert "rate" in missing.context["form"].errors
    assert not BenchmarkRun.objects.exists()
    chosen = client.post(
        "/benchmarks/new/", _custom(plain_endpoint, load="rate", concurrency=8, rate=5)
    )
    assert chosen.status_code == 302
    workload = BenchmarkRun.objects.get().workload
    assert workload["rate"] == 5 and workload.get("concurrency") is None


def test_the_compare_page_warns_of_figures_that_are_not_wire_times(
    plain_endpoint: Any, viewer: Any
) -> None:
    a = stored_run(plain_endpoint, ttft_scale=0.1, n=20, seed=1)
    b = stored_run(plain_endpoint, ttft_scale=0.1, n=20, seed=2)
    reason = "12.0% of first tokens reached the client in one TCP segment with the next chunk"
    BenchmarkRun.objects.filter(pk=b.pk).update(
        validity={**(b.validity or {}), "untrusted": {"ttft_s": reason}}
    )
    page = _client(viewer).get(f"/benchmarks/compare/?a={a.pk}&b={b.pk}").content.decode()
    side_b = page.split('data-side="B"')[1].split("</details>")[0]
    assert f"run #{b.pk}&#x27;s TTFT is not a wire time: {reason}" in side_b
