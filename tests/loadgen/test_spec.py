"""Workload specs, seed 003's settings, prompts and the tier mix."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loadgen import (
    SpecError,
    Stage,
    WorkloadSpec,
    from_seed003_settings,
    parse_stages,
    parse_tier_mix,
)
from loadgen.client import endpoint_url
from loadgen.prompts import RequestFactory, load_prompts_file

LOADGEN_DIR = Path(__file__).resolve().parents[2] / "loadgen"

# Seed 003's client settings.json, as printed in the report.
SEED003: dict[str, Any] = {
    "api": {
        "base_url": "https://taotoken.net/api",
        "api_key_env": "TAOTOKEN_API_KEY",
        "timeout_seconds": 120,
        "max_retries": 3,
    },
    "load_test": {
        "concurrency": 128,
        "duration_seconds": 300,
        "request_rate": 0,
        "warmup_seconds": 30,
    },
    "workload": {
        "prompt_tokens": 512,
        "max_output_tokens": 256,
        "stream": True,
        "temperature": 0.7,
    },
    "metrics": {"collect_tps": True, "sample_interval_ms": 500},
}


def base(**kw: object) -> WorkloadSpec:
    values: dict[str, object] = {
        "base_url": "http://x/v1",
        "model": "m",
        "concurrency": 1,
        "requests": 1,
    }
    values.update(kw)
    return WorkloadSpec.from_dict(values)


def test_seed003_settings_import_as_a_workload() -> None:
    spec = from_seed003_settings(SEED003, model="demo-8b")
    assert spec.base_url == "https://taotoken.net/api"
    assert (spec.concurrency, spec.rate, spec.duration_s, spec.warmup_s) == (128, None, 300, 30)
    assert (spec.prompt_tokens, spec.max_tokens, spec.stream) == (512, 256, True)
    assert spec.temperature == 0.7 and spec.timeout_s == 120
    assert spec.api_key is None
    with_rate = {**SEED003, "load_test": {**SEED003["load_test"], "request_rate": 20}}
    assert from_seed003_settings(with_rate, model="m").rate == 20
    with pytest.raises(SpecError, match=r"^model"):
        from_seed003_settings(SEED003)


def test_spec_round_trips_through_a_dict_without_the_key() -> None:
    spec = base(
        api_key="sk-secret",
        stages=[{"concurrency": 2, "duration_s": 5}],
        concurrency=None,
        requests=None,
        tier_mix={"online": 1.0},
    )
    data = spec.to_dict()
    assert data["api_key"] is None
    assert "sk-secret" not in json.dumps(data)
    again = WorkloadSpec.from_dict(data)
    assert again.stages == [Stage(2, 5.0)] and again.tier_mix == {"online": 1.0}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"rate": 5.0}, "concurrency"),  # two load shapes at once
        ({"requests": None}, "requests"),
        ({"endpoint": "embeddings"}, "endpoint"),
        ({"shared_prefix_tokens": 500, "prompt_tokens": 100}, "shared_prefix_tokens"),
        ({"tier_mix": {"online": -1.0}}, "tier_mix.online"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_invalid_specs_name_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError, match=f"^{field}"):
        base(**change)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stages": [{"concurrency": 2}]}, "stages[0].duration_s: Field required"),
        ({"tier_mix": [1]}, "tier_mix: Input should be a valid dictionary"),
        ({"requests": 1.5}, "requests: Input should be a valid integer"),
        ({"timeout_s": float("nan")}, "timeout_s: Input should be a finite number"),
        ({"concurrency": "abc"}, "concurrency: Input should be a valid integer"),
        ({"concurrency": 0}, "concurrency: must be >= 1"),
    ],
)
def test_json_workloads_with_wrong_types_name_the_field(
    data: dict[str, object], message: str
) -> None:
    workload = {"base_url": "http://h/v1", "model": "m", "concurrency": 2, "requests": 4, **data}
    if "stages" in data:
        workload.update(concurrency=None, requests=None)
    with pytest.raises(SpecError) as info:
        WorkloadSpec.from_dict(workload)
    assert str(info.value).startswith(message)
    with pytest.raises(SpecError, match=r"^workload: must be an object"):
        WorkloadSpec.from_dict([1])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"workload": {"prompt_tokens": "many"}},
            "workload.prompt_tokens: must be a finite number",
        ),
        ({"load_test": "x"}, "load_test: must be an object"),
        ({"load_test": {"concurrency": 1.5}}, "load_test.concurrency: must be a finite number"),
        (
            {"load_test": {"warmup_seconds": True}},
            "load_test.warmup_seconds: must be a finite number",
        ),
        ({"concurrency": "lots"}, "concurrency: must be a finite number"),
    ],
)
def test_bad_seed003_settings_name_the_field(settings: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as info:
        from_seed003_settings({"base_url": "http://h/v1", "model": "m", **settings})
    assert str(info.value).startswith(message)


def test_cli_strings_parse() -> None:
    assert parse_tier_mix("online=0.7, batch=0.2,offline=0.1") == {
        "online": 0.7,
        "batch": 0.2,
        "offline": 0.1,
    }
    assert parse_stages("32:60,128:180") == [Stage(32, 60.0), Stage(128, 180.0)]
    with pytest.raises(SpecError):
        parse_tier_mix("online")
    with pytest.raises(SpecError):
        parse_stages("32")


def test_base_url_with_or_without_v1_reaches_the_same_endpoint() -> None:
    for url in ("http://h:8/v1", "http://h:8/v1/", "http://h:8", "http://h:8/"):
        assert endpoint_url(url, "chat") == "http://h:8/v1/chat/completions"
    assert endpoint_url("http://h:8/v1", "completions") == "http://h:8/v1/completions"


def test_synthetic_prompts_have_the_target_words_and_a_shared_prefix() -> None:
    factory = RequestFactory(base(prompt_tokens=100, shared_prefix_tokens=40, max_tokens=7))
    bodies = [json.loads(factory.make(i).body) for i in range(3)]
    texts = [b["messages"][0]["content"] for b in bodies]
    assert all(len(t.split()) == 100 for t in texts)
    prefixes = {" ".join(t.split()[:40]) for t in texts}
    assert len(prefixes) == 1
    assert len({" ".join(t.split()[40:]) for t in texts}) == 3
    assert bodies[0]["stream_options"] == {"include_usage": True}
    assert bodies[0]["max_tokens"] == 7


def test_a_salt_leads_every_prompt_and_its_shared_prefix_and_reproduces(tmp_path: Path) -> None:
    spec = dict(prompt_tokens=100, shared_prefix_tokens=40, max_tokens=7)
    plain = [json.loads(RequestFactory(base(**spec)).make(i).body) for i in range(3)]
    salted = [
        json.loads(RequestFactory(base(**spec, salt="s-1f2e")).make(i).body) for i in range(3)
    ]
    again = [json.loads(RequestFactory(base(**spec, salt="s-1f2e")).make(i).body) for i in range(3)]
    assert salted == again
    for p, s in zip(plain, salted, strict=True):
        assert s["messages"][0]["content"] == "s-1f2e " + p["messages"][0]["content"]
    path = tmp_path / "p.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "yo"}]}\n{"prompt": "hi"}\n')
    factory = RequestFactory(base(prompts_file=str(path), salt="s9", endpoint="completions"))
    assert [json.loads(factory.make(i).body)["prompt"] for i in range(2)] == ["s9 yo", "s9 hi"]
    with pytest.raises(SpecError, match="salt"):
        base(salt=" padded")


def test_tier_mix_is_seeded_and_close_to_the_weights() -> None:
    mix = {"online": 0.7, "batch": 0.2, "offline": 0.1}
    tiers = [RequestFactory(base(tier_mix=mix, seed=3)).make(i).tier for i in range(1)]
    factory = RequestFactory(base(tier_mix=mix, seed=3))
    drawn = [factory.make(i).tier for i in range(2000)]
    again = RequestFactory(base(tier_mix=mix, seed=3))
    assert [again.make(i).tier for i in range(2000)] == drawn
    assert tiers[0] == drawn[0]
    counts = Counter(drawn)
    assert 0.65 < counts["online"] / 2000 < 0.75
    assert 0.07 < counts["offline"] / 2000 < 0.13


def test_prompts_file_lines_override_length_and_tier(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"prompt": "hi there", "max_tokens": 5, "tier": "batch"}\n\n'
        '{"messages": [{"role": "user", "content": "yo"}]}\n'
    )
    factory = RequestFactory(base(prompts_file=str(path), endpoint="completions"))
    first, second, third = (factory.make(i) for i in range(3))
    assert json.loads(first.body)["prompt"] == "hi there"
    assert (first.max_tokens, first.tier) == (5, "batch")
    assert json.loads(second.body)["prompt"] == "yo"
    assert json.loads(third.body)["prompt"] == "hi there"  # cycles


def test_bad_prompts_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "ok"}\n{"prompt": 3}\n')
    with pytest.raises(SpecError, match="line 2"):
        load_prompts_file(path)


def test_the_loadgen_package_never_imports_django() -> None:
    for module in LOADGEN_DIR.glob("*.py"):
        source = module.read_text()
        assert "import django" not in source and "from django" not in source, module.name


def test_tier_priority_sets_vllms_priority_field_for_that_tier() -> None:
    factory = RequestFactory(
        base(tier_mix={"online": 1.0, "batch": 1.0}, tier_priority={"online": 1})
    )
    planned = [factory.make(i) for i in range(20)]
    for p in planned:
        body = json.loads(p.body)
        assert body.get("priority") == (1 if p.tier == "online" else None)
    assert {p.tier for p in planned} == {"online", "batch"}
    with pytest.raises(SpecError, match=r"^tier_priority\.batch"):
        base(tier_priority={"batch": "high"})


def test_tier_stream_interval_sets_vllms_stream_interval_on_that_tiers_streams() -> None:
    spec = base(tier_mix={"online": 1.0, "batch": 1.0}, tier_stream_interval={"batch": 16})
    factory = RequestFactory(spec)
    planned = [factory.make(i) for i in range(20)]
    for p in planned:
        body = json.loads(p.body)
        assert body.get("stream_interval") == (16 if p.tier == "batch" else None)
    assert {p.tier for p in planned} == {"online", "batch"}
    whole = base(tier_mix={"batch": 1.0}, tier_stream_interval={"batch": 16}, stream=False)
    assert "stream_interval" not in json.loads(RequestFactory(whole).make(0).body)
    for bad in (0, -3, "sixteen", 2.5):
        with pytest.raises(SpecError, match=r"^tier_stream_interval\.batch: "):
            base(tier_stream_interval={"batch": bad})
