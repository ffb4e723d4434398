"""The tier config's reference table, made from the schema (`TierConfig.model_json_schema()`,
the same schema the console's form editor and the API's OpenAPI document read), so that the
table in docs/admission.md says what the code does and cannot drift: a test compares them.

    python -m scheduler reference                          # print the table
    python -m scheduler reference --write docs/admission.md  # rewrite it between the markers
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from scheduler.config import TierConfig

BEGIN = "<!-- BEGIN reference: made by `python -m scheduler reference`; do not edit by hand -->"
END = "<!-- END reference -->"

Schema = Mapping[str, Any]


def _resolve(node: Schema, defs: Schema) -> Schema:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return {**defs[ref.rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _branches(node: Schema) -> Iterator[Schema]:
    """The node's alternatives with the union's own keys (pydantic puts a bound shared by an
    `int | float` union, as "gt", on the union rather than on each branch)."""
    if "anyOf" not in node:
        yield node
        return
    outer = {k: v for k, v in node.items() if k not in ("anyOf", "description", "title")}
    for branch in node["anyOf"]:
        for leaf in _branches(branch):
            yield {**outer, **leaf}


def _bounds(node: Schema) -> list[str]:
    out = []
    for key, sign in (("exclusiveMinimum", ">"), ("gt", ">"), ("minimum", ">="), ("ge", ">=")):
        if key in node:
            out.append(f"{sign} {node[key]:g}")
    for key, sign in (("exclusiveMaximum", "<"), ("lt", "<"), ("maximum", "<="), ("le", "<=")):
        if key in node:
            out.append(f"{sign} {node[key]:g}")
    return out


def type_text(prop: Schema) -> str:
    """A field's type as a reader wants it: "number > 0 or null", "list of integer > 0"."""
    branches = list(_branches(prop))
    nullable = any(b.get("type") == "null" for b in branches)
    kinds = [b for b in branches if b.get("type") != "null"]
    names = {b.get("type") for b in kinds}
    if names <= {"integer", "number"} and names:
        name = "number" if "number" in names else "integer"
    elif names == {"array"}:
        name = "list of " + type_text(kinds[0].get("items", {}))
    else:
        name = " or ".join(sorted(str(n) for n in names))
    bounds: list[str] = []
    for branch in kinds:
        bounds += [b for b in _bounds(branch) if b not in bounds]
    text = " ".join([name, ", ".join(bounds)]).strip()
    return f"{text} or null" if nullable else text


def _rows(prefix: str, model: Schema) -> Iterator[tuple[str, Schema, bool]]:
    required = set(model.get("required", ()))
    for name, prop in model.get("properties", {}).items():
        yield f"{prefix}{name}", prop, name in required


def fields(schema: Schema | None = None) -> list[tuple[str, Schema, bool]]:
    """Every settable leaf field: (path under "scheduler", its schema, required)."""
    schema = schema if schema is not None else TierConfig.model_json_schema()
    defs = schema.get("$defs", {})
    sched = _resolve(schema["properties"]["scheduler"], defs)
    out: list[tuple[str, Schema, bool]] = []
    for section, prop in sched["properties"].items():
        part = _resolve(prop, defs)
        if section == "queues":
            queue = _resolve(part["additionalProperties"], defs)
            out += _rows("queues.<tier>.", queue)
        else:
            out += _rows(f"{section}.", part)
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def reference_table(schema: Schema | None = None) -> str:
    """The markdown table: field, type, default, description; one row per settable field."""
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for path, prop, required in fields(schema):
        default = "required" if required else f"`{json.dumps(prop.get('default'))}`"
        description = _cell(str(prop.get("description", "")))
        lines.append(f"| `{path}` | {type_text(prop)} | {default} | {description} |")
    return "\n".join(lines) + "\n"


def _markers(text: str) -> tuple[int, int]:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the reference markers are missing: {BEGIN!r} ... {END!r}")
    return start + len(BEGIN), end


def table_in(text: str) -> str:
    """The table between the markers of a document (docs/admission.md)."""
    start, end = _markers(text)
    return text[start:end].strip("\n") + "\n"


def with_table(text: str, table: str | None = None) -> str:
    """The document with the table between its markers replaced by `table` (the schema's)."""
    start, end = _markers(text)
    return text[:start] + "\n" + (table or reference_table()) + text[end:]
