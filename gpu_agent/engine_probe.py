"""What the node's engine accepts, read from the engine's own argument parser.

Run with the engine's Python (the agent finds it from the engine command line, see
`gpu_agent.engine_report`, which also keeps this file's folder off sys.path), so it imports
only the standard library until it imports the engine: vLLM's venv has no Tiergate.

    PYTHON engine_probe.py describe vllm|sim          -> {"engine", "version", "options": [...]}
    PYTHON engine_probe.py check vllm|sim -- ARGS...  -> {"ok": true} | {"ok": false, "error"}

Each option (docs/protocol.md, "Engine report") is
``{"flags": ["--max-num-seqs"], "dest": "max_num_seqs", "kind": "store", "nargs": null,
"type": "int", "choices": null}``: kind is store (takes values), flag (no value), bool
(`--x/--no-x`), append or positional; type is int, float or null (anything: vLLM's own
converters, strings); choices are the accepted values when the parser restricts them. A check
returns the parser's own error text, e.g. "unrecognized arguments: --turbo-mode".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

_KINDS = {
    "_StoreTrueAction": "flag",
    "_StoreFalseAction": "flag",
    "_StoreConstAction": "flag",
    "_CountAction": "flag",
    "BooleanOptionalAction": "bool",
    "_AppendAction": "append",
}
_SKIPPED = ("_HelpAction", "_VersionAction", "_SubParsersAction")


class ParserError(Exception):
    """argparse's error() message, raised instead of printing usage and exiting."""


def _engine_parser(engine: str) -> tuple[argparse.ArgumentParser, str]:
    """The parser of `vllm serve` (or the simulator's `serve`) and the engine's version."""
    if engine == "vllm":
        import vllm
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        return make_arg_parser(FlexibleArgumentParser(prog="vllm serve")), str(vllm.__version__)
    # The simulator runs with the agent's own Python: its package is the probe's parent.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from gpu_agent import __version__
    from gpu_agent.sim.config import build_parser

    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["serve"], f"tiergate-sim {__version__}"


def _json_value(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def option_table(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    options = []
    for action in parser._actions:
        name = type(action).__name__
        if name in _SKIPPED:
            continue
        kind = "positional" if not action.option_strings else _KINDS.get(name, "store")
        if kind == "store" and action.nargs == 0:
            kind = "flag"
        kind_of_type = {int: "int", float: "float"}.get(action.type)  # type: ignore[call-overload]
        options.append(
            {
                "flags": list(action.option_strings),
                "dest": action.dest,
                "kind": kind,
                "nargs": action.nargs if isinstance(action.nargs, (int, str)) else None,
                "type": kind_of_type,
                "choices": (
                    None if action.choices is None else [_json_value(c) for c in action.choices]
                ),
            }
        )
    return options


def describe(engine: str) -> dict[str, Any]:
    parser, version = _engine_parser(engine)
    return {
        "engine": engine,
        "version": version,
        "allow_abbrev": parser.allow_abbrev,  # whether `--max-num-s` stands for `--max-num-seqs`
        "options": option_table(parser),
    }


def check(engine: str, args: list[str]) -> dict[str, Any]:
    """Parse `args` (after `vllm serve`) with the engine's parser; its error text if any."""
    parser, _ = _engine_parser(engine)

    def error(message: str) -> None:
        raise ParserError(message)

    parser.error = error  # type: ignore[method-assign,assignment]
    try:
        namespace = parser.parse_args(args)
        if engine == "vllm":
            from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

            validate_parsed_serve_args(namespace)
    except ParserError as exc:
        return {"ok": False, "error": str(exc)}
    except (TypeError, ValueError) as exc:  # vLLM's own validation after parsing
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "error": None}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("describe", "check") or argv[1] not in ("vllm", "sim"):
        print(__doc__, file=sys.stderr)
        return 2
    command, engine, rest = argv[0], argv[1], argv[2:]
    if command == "describe":
        result = describe(engine)
    else:
        result = check(engine, rest[1:] if rest[:1] == ["--"] else rest)
    # Last line of stdout: importing an engine may print its own lines before.
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
