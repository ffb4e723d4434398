"""A tier config a person can read (issue 57, item 4): every settable field is described in the
schema, docs/admission.md's reference table is the schema's (so it cannot drift), and a field
removed for lack of a measured gain is refused naming it and saying why, on the command line
too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from scheduler import AdaptiveConfig, AdmissionConfig, QueueConfig, SchedulerConfig, TierConfig
from scheduler.__main__ import main
from scheduler.config import REMOVED_FIELDS, ConfigError, parse_config, without_removed
from scheduler.reference import BEGIN, END, fields, reference_table, table_in, with_table
from tests.scheduler.sched_helpers import seed_dict

ROOT = Path(__file__).resolve().parents[2]
SECTIONS: dict[str, type[BaseModel]] = {
    "queues.<tier>.": QueueConfig,
    "adaptive.": AdaptiveConfig,
    "admission.": AdmissionConfig,
}
SEED_FIELDS = {
    "queues.<tier>.max_batch_size",
    "queues.<tier>.max_waiting_time_ms",
    "queues.<tier>.max_tokens_per_batch",
    "queues.<tier>.priority",
    "adaptive.enabled",
    "adaptive.online_pressure_threshold",
    "adaptive.wait_time_reduction_ratio",
}


@pytest.mark.parametrize("model", [TierConfig, SchedulerConfig, *SECTIONS.values()])
def test_every_field_of_every_model_has_a_description(model: type[BaseModel]) -> None:
    for name, info in model.model_fields.items():
        text = info.description or ""
        assert len(text.split()) >= 5, f"{model.__name__}.{name}: {text!r}"


def test_the_reference_lists_every_settable_field_once_with_its_description() -> None:
    listed = [path for path, _, _ in fields()]
    expected = [prefix + name for prefix, model in SECTIONS.items() for name in model.model_fields]
    assert listed == expected
    assert set(listed) >= SEED_FIELDS  # the seed's seven are kept
    for path, prop, required in fields():
        text = prop["description"]
        assert text.strip() and "\n" not in text, path
        if not required:  # what happens when it is left out
            assert "default" in text.lower(), f"{path}: says no default: {text!r}"
    required = {path for path, _, req in fields() if req}
    assert required == {p for p in SEED_FIELDS if p.startswith("queues.")}


def test_docs_admission_holds_the_schemas_reference_table() -> None:
    """Fails when a description, a default or a field changes without
    `python -m scheduler reference --write docs/admission.md`."""
    doc = (ROOT / "docs" / "admission.md").read_text(encoding="utf-8")
    assert table_in(doc) == reference_table(), (
        "docs/admission.md's reference table differs from the schema: run "
        "`python -m scheduler reference --write docs/admission.md`"
    )
    rows = [line for line in table_in(doc).splitlines() if line.startswith("| `")]
    assert len(rows) == len(fields())


def test_the_table_shows_types_defaults_and_the_removed_fields_are_gone() -> None:
    table = reference_table()
    assert "| `admission.shed_after_ms` | number > 0 or null | `30000` |" in table
    assert "| `queues.<tier>.length_groups` | list of integer > 0 | `[]` |" in table
    assert "| `queues.<tier>.max_batch_size` | integer > 0 | required |" in table
    assert "| `queues.<tier>.stream_interval_tokens` | integer >= 1, <= 1024 or null |" in table
    for _, name in REMOVED_FIELDS:
        assert name not in table


def test_writing_the_table_replaces_only_what_lies_between_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nbefore\n{BEGIN}\n| stale |\n{END}\nafter\n", encoding="utf-8")
    assert main(["reference", "--write", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nbefore\n" + BEGIN + "\n")
    assert text.endswith(END + "\nafter\n") and "| stale |" not in text
    assert table_in(text) == reference_table()
    assert with_table(text) == text  # written once, it is what the schema makes
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n", encoding="utf-8")
    assert main(["reference", "--write", str(bare)]) == 1
    assert bare.read_text(encoding="utf-8") == "no markers\n"


def test_the_reference_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reference"]) == 0
    assert capsys.readouterr().out == reference_table()


def _errors(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    return [str(e) for e in info.value.errors]


@pytest.mark.parametrize(
    ("where", "name", "value", "why"),
    [
        (("queues", "offline"), "stream_pace_ms", 100, "superseded by stream_interval_tokens"),
        (("admission",), "reserve_caps_lower_tiers", True, "x1.137"),
    ],
)
def test_a_removed_field_is_refused_naming_it_and_why(
    where: tuple[str, ...], name: str, value: Any, why: str
) -> None:
    doc = seed_dict()
    section = doc["scheduler"]
    for key in where:
        section = section.setdefault(key, {})
    section[name] = value
    path = ".".join(("scheduler", *where, name))
    errors = _errors(doc)
    assert len(errors) == 1 and errors[0].startswith(f"{path}: removed: "), errors
    assert why in errors[0] and "delete it" in errors[0]


def test_a_removed_name_elsewhere_or_an_unknown_field_is_just_unknown() -> None:
    doc = seed_dict()
    doc["scheduler"]["admission"] = {"stream_pace_ms": 100}  # a queue's field, not admission's
    doc["scheduler"]["queues"]["batch"]["reserve_caps_lower_tiers"] = True
    doc["scheduler"]["queues"]["online"]["colour"] = "red"
    assert sorted(_errors(doc)) == [
        "scheduler.admission.stream_pace_ms: unknown field",
        "scheduler.queues.batch.reserve_caps_lower_tiers: unknown field",
        "scheduler.queues.online.colour: unknown field",
    ]


def test_validate_on_the_command_line_names_the_removed_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = seed_dict()
    doc["scheduler"]["admission"] = {"reserve_caps_lower_tiers": False}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: scheduler.admission.reserve_caps_lower_tiers: removed: " in err


def test_a_document_stored_before_a_removal_still_parses_without_the_removed_fields() -> None:
    """New writes of a removed field are refused; a stored version (an agent's saved or desired
    config, a console version) is read without it, and each field dropped is named."""
    seed = seed_dict()
    document = json.loads(json.dumps(seed))
    document["scheduler"]["queues"]["batch"]["stream_pace_ms"] = 100
    document["scheduler"].setdefault("admission", {})["reserve_caps_lower_tiers"] = True
    with pytest.raises(ConfigError):
        parse_config(document)
    current, dropped = without_removed(document)
    assert sorted(dropped) == [
        "scheduler.admission.reserve_caps_lower_tiers",
        "scheduler.queues.batch.stream_pace_ms",
    ]
    assert parse_config(current) == parse_config(seed)
    assert "stream_pace_ms" in document["scheduler"]["queues"]["batch"]  # the input is kept
    assert without_removed(seed) == (seed, [])
