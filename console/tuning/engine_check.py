"""A launch profile checked against the engine report of the nodes that will run it.

Each agent reports its engine's version and the options its own argument parser accepts
(docs/protocol.md, "Engine report"; read from vLLM's parser on the node, nothing hand-listed
here). vLLM's parser is an argparse parser, so the console rebuilds one from the report and
parses the profile's rendered `vllm serve` argv with it: the refusal is argparse's, the same
text vLLM itself prints ("unrecognized arguments: --turbo-mode", "argument --max-num-seqs:
invalid int value: 'x'"). Value converters that are vLLM's own code (not int or float) are not
replayed: such values are taken as given and vLLM judges them when the engine starts.

A node without a report (attached mode, an older agent, a probe that failed) is checked with
vllm_args' built-in rules alone, and the caller says so.

    check_on_nodes(args, nodes) -> NodeCheck(errors=[FieldError...], unchecked=[names])
    profile_refusals(stored_args, nodes) -> ["vLLM 0.32.0 on gpu-1 refuses: ...", ...]

Pure: no Django; nodes are anything with `.name` and `.engine_report`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.tuning.vllm_args import LaunchArgs, render_argv, validate_args
from scheduler import FieldError

_TYPES = {"int": int, "float": float}
# vLLM's parser turns `--max_num_seqs` into `--max-num-seqs` (the name up to a dot).
_UNDERSCORES = re.compile(r"(?<=--)[^.=]*")


class _Refused(Exception):
    pass


class _Replica(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse prints and exits; we want the text
        raise _Refused(message)


def replica_parser(report: Mapping[str, Any]) -> argparse.ArgumentParser:
    parser = _Replica(
        prog="vllm serve", add_help=False, allow_abbrev=bool(report.get("allow_abbrev", True))
    )
    for option in report.get("options") or []:
        flags = list(option.get("flags") or [])
        kind = option.get("kind")
        choices = option.get("choices")
        kwargs: dict[str, Any] = {"dest": option.get("dest") or None}
        if kind in ("flag", "bool"):
            kwargs["action"] = "store_true"
        else:
            kwargs["action"] = "append" if kind == "append" else "store"
            if option.get("nargs") is not None:
                kwargs["nargs"] = option["nargs"]
            if option.get("type") in _TYPES:
                kwargs["type"] = _TYPES[option["type"]]
            if choices is not None:
                # Without a known converter the value stays a string: compare as strings.
                kwargs["choices"] = choices if "type" in kwargs else [str(c) for c in choices]
        if kind == "positional":
            name = kwargs.pop("dest") or "model_tag"
            parser.add_argument(name, **kwargs)
        elif flags:
            parser.add_argument(*flags, **kwargs)
    return parser


def _normalised(args: Sequence[str]) -> list[str]:
    """vLLM's preprocessing: underscores to dashes in names; dotted names (`--x.y v`, JSON
    config fields) are vLLM's own syntax and are left to it."""
    out: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            if not arg.startswith("-"):
                continue
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if "." in name:
                skip_value = "=" not in arg
                continue
            arg = _UNDERSCORES.sub(lambda m: m.group(0).replace("_", "-"), arg, count=1)
        out.append(arg)
    return out


def refusal(report: Mapping[str, Any], argv: Sequence[str]) -> str | None:
    """What the node's vLLM parser says to `argv` (`vllm serve ...`), or None if it accepts."""
    args = list(argv[2:] if list(argv[:2]) == ["vllm", "serve"] else argv)
    if report.get("engine") == "vllm":  # the simulator's parser is plain argparse
        args = _normalised(args)
    try:
        replica_parser(report).parse_args(args)
    except _Refused as exc:
        return str(exc)
    return None


def has_report(node: Any) -> bool:
    report = getattr(node, "engine_report", None) or {}
    return bool(report.get("options")) and not report.get("error")


def engine_label(report: Mapping[str, Any]) -> str:
    version = report.get("version") or "(version unknown)"
    return f"vLLM {version}" if report.get("engine") == "vllm" else f"the simulator ({version})"


@dataclass
class NodeCheck:
    errors: list[FieldError] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # nodes whose engine report was used
    unchecked: list[str] = field(default_factory=list)  # nodes without one: built-in rules only

    @property
    def note(self) -> str:
        """What the page says about the check, when some node had no report."""
        if not self.unchecked:
            return ""
        return (
            "No engine report from " + ", ".join(self.unchecked) + ": checked with the "
            "built-in rules only, the engine will judge the rest when it restarts."
        )


def _field_of(message: str, args: LaunchArgs) -> str:
    """The profile field a refusal is about: a managed field's flag, else extra_args."""
    named = re.search(r"argument (\S+?)[:/]", message)
    flag = named.group(1) if named else ""
    for name in type(args).model_fields:
        if name not in ("model", "extra_args") and flag == "--" + name.replace("_", "-"):
            return name
    return "extra_args" if args.extra_args else "(root)"


def check_on_nodes(args: LaunchArgs, nodes: Iterable[Any]) -> NodeCheck:
    """Check the profile against every node's report; one error per distinct refusal, naming
    the nodes (by engine version) that refuse it."""
    result = NodeCheck()
    argv = render_argv(args)
    refused: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for node in nodes:
        if not has_report(node):
            result.unchecked.append(node.name)
            continue
        result.checked.append(node.name)
        message = refusal(node.engine_report, argv)
        if message is not None:
            refused.setdefault(message, []).append(node.name)
            labels.setdefault(message, engine_label(node.engine_report))
    for message, names in refused.items():
        where = f"{labels[message]} on {', '.join(names)}"
        result.errors.append(FieldError(_field_of(message, args), f"{where} refuses: {message}"))
    return result


def profile_refusals(stored_args: Mapping[str, Any], nodes: Iterable[Any]) -> list[str]:
    """A stored profile's refusals by the nodes' engines (the rollout's last check)."""
    return [error.message for error in check_on_nodes(validate_args(stored_args), nodes).errors]
