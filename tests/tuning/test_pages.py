"""The browser pages: lists, details with diffs, create forms, downloads, role checks."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from console.audit.models import AuditEvent
from console.tuning import services
from console.tuning.models import LaunchProfileVersion, TierConfigVersion


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def tier_versions(
    operator: Any, seed_tiers: dict[str, Any]
) -> tuple[TierConfigVersion, TierConfigVersion]:
    v1 = services.create_tier_config(
        name="default", config=seed_tiers, message="seed", user=operator
    )
    tighter = copy.deepcopy(seed_tiers)
    tighter["scheduler"]["queues"]["online"]["max_waiting_time_ms"] = 5
    v2 = services.create_tier_config(
        name="default", config=tighter, message="tighter", user=operator
    )
    return v1, v2


@pytest.fixture
def profile(operator: Any, profile_args: dict[str, Any]) -> LaunchProfileVersion:
    return services.create_launch_profile(name="demo-8b", args=profile_args, user=operator)


def test_the_nav_bar_links_both_lists(viewer: Any) -> None:
    html = client_for(viewer).get("/fleet/").content.decode()
    assert 'href="/tuning/tier-configs/"' in html and 'href="/tuning/launch-profiles/"' in html


def test_a_viewer_sees_lists_grouped_by_name_without_create_buttons(
    viewer: Any, tier_versions: Any, profile: Any
) -> None:
    client = client_for(viewer)
    html = client.get("/tuning/tier-configs/").content.decode()
    assert 'id="group-default"' in html
    assert html.index(">v2<") < html.index(">v1<")  # newest first
    assert "<time datetime=" in html
    assert "/tuning/tier-configs/new/" not in html
    html = client.get("/tuning/launch-profiles/").content.decode()
    assert 'id="group-demo-8b"' in html and "/tuning/launch-profiles/new/" not in html


def test_an_operator_sees_create_buttons(operator: Any, tier_versions: Any) -> None:
    client = client_for(operator)
    assert 'id="create-link"' in client.get("/tuning/tier-configs/").content.decode()
    detail = client.get(f"/tuning/tier-configs/{tier_versions[1].pk}/").content.decode()
    assert f'href="/tuning/tier-configs/new/?from={tier_versions[1].pk}"' in detail


def test_the_list_of_one_name_is_paginated(
    viewer: Any, operator: Any, seed_tiers: dict[str, Any]
) -> None:
    for _ in range(55):
        services.create_tier_config(name="many", config=seed_tiers, user=operator)
    client = client_for(viewer)
    first = client.get("/tuning/tier-configs/?name=many").content.decode()
    assert ">v55<" in first and ">v5<" not in first and "page 1 of 2" in first
    second = client.get("/tuning/tier-configs/?name=many&page=2").content.decode()
    assert ">v5<" in second and ">v55<" not in second
    grouped = client.get("/tuning/tier-configs/").content.decode()
    assert "All 55 versions" in grouped


def test_detail_shows_the_diff_against_the_previous_version(
    viewer: Any, tier_versions: Any
) -> None:
    v2 = tier_versions[1]
    html = client_for(viewer).get(f"/tuning/tier-configs/{v2.pk}/").content.decode()
    table = html[html.index('<table class="grid" id="diff">') :]
    table = table[: table.index("</table>")]
    assert "scheduler.queues.online.max_waiting_time_ms" in table
    assert re.search(r'class="value old">10<.*class="value new">5<', table, re.S)
    assert 'tr class="changed"' in table
    assert "&quot;max_waiting_time_ms&quot;: 5" in html  # the JSON itself


def test_detail_diffs_against_a_chosen_version(
    viewer: Any, tier_versions: Any, seed_tiers: dict[str, Any], operator: Any
) -> None:
    v1 = tier_versions[0]
    small = copy.deepcopy(seed_tiers)
    del small["scheduler"]["queues"]["offline"]
    other = services.create_tier_config(name="small", config=small, user=operator)
    html = (
        client_for(viewer).get(f"/tuning/tier-configs/{v1.pk}/?against={other.pk}").content.decode()
    )
    assert "scheduler.queues.offline" in html and 'tr class="added"' in html
    assert client_for(viewer).get(f"/tuning/tier-configs/{v1.pk}/?against=x").status_code == 400


def test_the_first_version_has_an_empty_diff_table(viewer: Any, tier_versions: Any) -> None:
    html = client_for(viewer).get(f"/tuning/tier-configs/{tier_versions[0].pk}/").content.decode()
    assert 'id="diff"' in html and "is the first version of default" in html


def test_launch_profile_detail_shows_command_and_yaml(
    viewer: Any, profile: LaunchProfileVersion
) -> None:
    html = client_for(viewer).get(f"/tuning/launch-profiles/{profile.pk}/").content.decode()
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct --served-model-name llama-8b" in html
    assert "kind: HorizontalPodAutoscaler" in html


def test_json_download_is_an_attachment(
    viewer: Any, tier_versions: Any, profile: LaunchProfileVersion, seed_tiers: dict[str, Any]
) -> None:
    client = client_for(viewer)
    response = client.get(f"/tuning/tier-configs/{tier_versions[0].pk}/download/")
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="default-v1.json"'
    assert json.loads(response.content) == seed_tiers
    response = client.get(f"/tuning/launch-profiles/{profile.pk}/download/")
    assert json.loads(response.content) == profile.args


def test_kubernetes_download_is_an_attachment(viewer: Any, profile: LaunchProfileVersion) -> None:
    response = client_for(viewer).get(f"/tuning/launch-profiles/{profile.pk}/kubernetes/")
    assert response["Content-Disposition"] == 'attachment; filename="demo-8b-v1.yaml"'
    kinds = [d["kind"] for d in yaml.safe_load_all(response.content.decode())]
    assert "StatefulSet" in kinds and "HorizontalPodAutoscaler" in kinds


def test_a_viewer_cannot_open_or_post_the_create_page(
    viewer: Any, seed_tiers: dict[str, Any]
) -> None:
    client = client_for(viewer)
    assert client.get("/tuning/tier-configs/new/").status_code == 403
    data = {"name": "x", "message": "", "config": json.dumps(seed_tiers)}
    assert client.post("/tuning/tier-configs/new/", data).status_code == 403
    assert client.get("/tuning/launch-profiles/new/").status_code == 403
    assert not TierConfigVersion.objects.exists()


def test_without_a_role_pages_are_403_and_anonymous_is_sent_to_sign_in(
    outsider: Any, tier_versions: Any
) -> None:
    assert client_for(outsider).get("/tuning/tier-configs/").status_code == 403
    response = Client().get("/tuning/tier-configs/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_create_page_is_prefilled_with_the_default_config(
    operator: Any, seed_tiers: dict[str, Any]
) -> None:
    response = client_for(operator).get("/tuning/tier-configs/new/")
    html = response.content.decode()
    assert 'name="name"' in html and 'name="message"' in html and 'name="upload"' in html
    assert "Create version</button>" in html
    assert json.loads(response.context["form"].initial["config"]) == seed_tiers


def test_new_version_of_this_prefills_from_the_version(operator: Any, tier_versions: Any) -> None:
    v2 = tier_versions[1]
    form = client_for(operator).get(f"/tuning/tier-configs/new/?from={v2.pk}").context["form"]
    assert form.initial["name"] == "default"
    assert json.loads(form.initial["config"]) == v2.config


def test_pasting_the_seed_creates_the_next_version_and_shows_its_diff(
    operator: Any, tier_versions: Any, seed_tiers: dict[str, Any]
) -> None:
    client = client_for(operator)
    response = client.post(
        "/tuning/tier-configs/new/",
        {"name": "default", "message": "back to the seed", "config": json.dumps(seed_tiers)},
        follow=True,
    )
    v3 = TierConfigVersion.objects.get(name="default", version=3)
    assert response.redirect_chain[-1][0] == f"/tuning/tier-configs/{v3.pk}/"
    html = response.content.decode()
    assert "Created default v3." in html
    assert re.search(r'class="value old">5<.*class="value new">10<', html, re.S)
    assert (v3.author, v3.message, v3.config) == (operator, "back to the seed", seed_tiers)
    event = AuditEvent.objects.filter(object_id=str(v3.pk)).get()
    assert event.action == "create" and event.after["config"] == seed_tiers


def test_uploading_a_file_creates_a_version(operator: Any, seed_tiers: dict[str, Any]) -> None:
    upload = SimpleUploadedFile(
        "tiers.json", json.dumps(seed_tiers).encode(), content_type="application/json"
    )
    response = client_for(operator).post(
        "/tuning/tier-configs/new/",
        {"name": "uploaded", "message": "", "config": "", "upload": upload},
    )
    assert response.status_code == 302
    assert TierConfigVersion.objects.get(name="uploaded").config == seed_tiers


def test_validation_errors_show_beside_the_field_with_their_path(
    operator: Any, bad_tiers: dict[str, Any]
) -> None:
    response = client_for(operator).post(
        "/tuning/tier-configs/new/",
        {"name": "broken", "message": "", "config": json.dumps(bad_tiers)},
    )
    assert response.status_code == 200
    html = response.content.decode()
    errors = html[html.index('id="errors-config"') :]
    errors = errors[: errors.index("</ul>")]
    assert "scheduler.queues.batch.priority: must differ from" in errors
    assert "scheduler.queues.batch.max_batch_size:" in errors
    assert "scheduler.adaptive.wait_time_reduction_ratio:" in errors
    assert not TierConfigVersion.objects.exists()


def test_an_uploaded_broken_file_shows_its_text_and_errors(
    operator: Any, bad_tiers: dict[str, Any]
) -> None:
    upload = SimpleUploadedFile("bad.json", json.dumps(bad_tiers).encode())
    response = client_for(operator).post(
        "/tuning/tier-configs/new/", {"name": "broken", "config": "", "upload": upload}
    )
    form = response.context["form"]
    assert any("priority" in e for e in form.errors["config"])
    assert json.loads(form["config"].value()) == bad_tiers


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "invalid JSON at line 1 column 2"),
        ("", "paste the JSON here or upload a file"),
    ],
)
def test_bad_json_is_reported_on_the_textarea(operator: Any, text: str, words: str) -> None:
    response = client_for(operator).post("/tuning/tier-configs/new/", {"name": "x", "config": text})
    assert words in response.context["form"].errors["config"][0]


def test_a_bad_name_is_reported_on_the_name_field(
    operator: Any, seed_tiers: dict[str, Any]
) -> None:
    response = client_for(operator).post(
        "/tuning/tier-configs/new/", {"name": "a b", "config": json.dumps(seed_tiers)}
    )
    assert "name" in response.context["form"].errors


def test_creating_a_launch_profile_from_the_form(
    operator: Any, profile_args: dict[str, Any]
) -> None:
    client = client_for(operator)
    assert (
        "scheduling_policy"
        in client.get("/tuning/launch-profiles/new/").context["form"].initial["args"]
    )
    bad = {**profile_args, "extra_args": ["--disable-log-requests"]}
    response = client.post("/tuning/launch-profiles/new/", {"name": "p", "args": json.dumps(bad)})
    assert any(
        "extra_args.0: --disable-log-requests" in e for e in response.context["form"].errors["args"]
    )
    response = client.post(
        "/tuning/launch-profiles/new/", {"name": "p", "args": json.dumps(profile_args)}, follow=True
    )
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in response.content.decode()
    assert LaunchProfileVersion.objects.get(name="p").args == profile_args


def test_the_grouped_list_costs_a_fixed_number_of_queries(
    viewer: Any, operator: Any, seed_tiers: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    for name in ("a", "b", "c", "d", "e"):
        for _ in range(3):
            services.create_tier_config(name=name, config=seed_tiers, user=operator)
    client = client_for(viewer)
    with django_assert_max_num_queries(8):
        html = client.get("/tuning/tier-configs/").content.decode()
    assert html.count('class="card" id="group-') == 5


def test_a_stored_profile_renders_even_if_a_newer_rule_would_refuse_it(
    viewer: Any, operator: Any
) -> None:
    profile = services.create_launch_profile(name="old", args={"model": "m"}, user=operator)
    # As if written before the batched-tokens rule existed (a query update bypasses save()).
    LaunchProfileVersion.objects.filter(pk=profile.pk).update(
        args={"model": "m", "max_model_len": 8192, "max_num_batched_tokens": 2048}
    )
    html = client_for(viewer).get(f"/tuning/launch-profiles/{profile.pk}/").content.decode()
    assert "--max-num-batched-tokens 2048" in html
