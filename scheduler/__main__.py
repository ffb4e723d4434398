"""Command line: `python -m scheduler validate FILE...`, `python -m scheduler diff OLD NEW` and
`python -m scheduler reference [--write DOC]`.

validate: prints "FILE: ok" per valid file, or one "FILE: path: rule" line per error on
stderr; exit 1 if any file is invalid. diff: one "path: old -> new" line per change (values as
JSON), or "no differences"; exit 0, or 1 when either file is invalid. reference: the tier
config's reference table made from the schema (scheduler/reference.py), printed, or written
between the markers of DOC (docs/admission.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler.config import ConfigError, TierConfig, diff_configs, load_config_file
from scheduler.reference import reference_table, with_table


def _load(path: str) -> TierConfig | None:
    try:
        return load_config_file(path)
    except ConfigError as exc:
        for err in exc.errors:
            print(f"{path}: {err}", file=sys.stderr)
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
    except UnicodeDecodeError as exc:
        print(f"{path}: not UTF-8 text: {exc.reason}", file=sys.stderr)
    return None


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=False)


def _validate(files: Sequence[str]) -> int:
    status = 0
    for path in files:
        if _load(path) is None:
            status = 1
        else:
            print(f"{path}: ok")
    return status


def _diff(old_path: str, new_path: str) -> int:
    old, new = _load(old_path), _load(new_path)
    if old is None or new is None:
        return 1
    changes = diff_configs(old, new)
    if not changes:
        print("no differences")
    for change in changes:
        print(f"{change.path}: {_show(change.old)} -> {_show(change.new)}")
    return 0


def _reference(doc: str | None) -> int:
    if doc is None:
        print(reference_table(), end="")
        return 0
    path = Path(doc)
    try:
        path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"{doc}: {exc}", file=sys.stderr)
        return 1
    print(f"{doc}: reference table written")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler", description="Tier config tools")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="validate tier config JSON files")
    validate.add_argument("files", nargs="+", metavar="FILE")
    diff = commands.add_parser("diff", help="list the changes between two tier configs")
    diff.add_argument("old", metavar="OLD.json")
    diff.add_argument("new", metavar="NEW.json")
    reference = commands.add_parser("reference", help="the tier config's reference table")
    reference.add_argument(
        "--write", metavar="DOC", help="replace the table between DOC's markers instead"
    )
    args = parser.parse_args(argv)
    if args.command == "validate":
        return _validate(args.files)
    if args.command == "reference":
        return _reference(args.write)
    return _diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
