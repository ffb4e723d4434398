"""vLLM launch arguments: schema, vLLM's own cross-field rules, and the `vllm serve` argv.

Pure (pydantic, stdlib and scheduler.FieldError; no Django), so the console, scripts and tests
share one definition.
Arguments are snake_case (`max_num_seqs`), each rendered as vLLM's kebab-case flag
(`--max-num-seqs`). A field left unset (None) renders no flag at all: the engine's own default
applies, which differs between vLLM releases, so we never write one in on the user's behalf.

    validate_args(data) -> LaunchArgs        # raises ArgsError(.errors: list[FieldError])
    args_to_dict(args) -> dict               # only the fields that were set
    render_argv(args) -> list[str]           # ["vllm", "serve", MODEL, "--flag", "value", ...]
    render_command(args) -> str              # shlex-joined argv
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

# "path: rule", the same as a tier config's errors, so forms and the API show both alike.
from scheduler import FieldError
from scheduler.config import field_errors

# Flags the field reports use that vLLM does not accept (seeds README): flag -> the advice.
FORBIDDEN_EXTRA_FLAGS = {
    "--scheduler-policy": (
        "is not a vLLM flag; use --scheduling-policy (the scheduling_policy field)"
    ),
    "--disable-log-requests": "is deprecated and rejected by recent vLLM; request logging is off "
    "by default, use --enable-log-requests to turn it on",
}

PositiveInt = Annotated[StrictInt, Field(ge=1)]


class LaunchArgs(BaseModel):
    """The `vllm serve` arguments Tiergate manages; anything else goes in `extra_args`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: Annotated[StrictStr, Field(min_length=1)]
    served_model_name: Annotated[StrictStr, Field(min_length=1)] | None = None
    tensor_parallel_size: PositiveInt | None = None
    pipeline_parallel_size: PositiveInt | None = None
    dtype: Literal["auto", "half", "float16", "bfloat16", "float"] | None = None
    # Ints are fine too (1 means the whole GPU).
    gpu_memory_utilization: (
        Annotated[StrictFloat | StrictInt, Field(gt=0, le=1, allow_inf_nan=False)] | None
    ) = None
    max_model_len: PositiveInt | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    scheduling_policy: Literal["fcfs", "priority"] | None = None
    enable_prefix_caching: StrictBool | None = None
    enable_chunked_prefill: StrictBool | None = None
    block_size: Literal[1, 8, 16, 32, 64, 128] | None = None
    host: Annotated[StrictStr, Field(min_length=1)] | None = None
    port: Annotated[StrictInt, Field(ge=1, le=65535)] | None = None
    async_scheduling: StrictBool | None = None
    extra_args: list[StrictStr] = Field(default_factory=list)

    @property
    def gpus(self) -> int:
        """GPUs one replica needs: tensor x pipeline parallel."""
        return (self.tensor_parallel_size or 1) * (self.pipeline_parallel_size or 1)


FIELD_NAMES = tuple(LaunchArgs.model_fields)
# Fields rendered as --flag / --no-flag (vLLM uses argparse's BooleanOptionalAction for them).
BOOLEAN_FIELDS = ("enable_prefix_caching", "enable_chunked_prefill", "async_scheduling")


def flag_of(field: str) -> str:
    return "--" + field.replace("_", "-")


# Every spelling of a managed field's flag, so extra_args cannot set it a second time.
_MANAGED_FLAGS = {flag_of(f): f for f in FIELD_NAMES if f not in ("model", "extra_args")}
_MANAGED_FLAGS.update({"--no-" + flag_of(f)[2:]: f for f in BOOLEAN_FIELDS})
_MANAGED_FLAGS.update({"-tp": "tensor_parallel_size", "-pp": "pipeline_parallel_size"})


class ArgsError(ValueError):
    """Launch arguments that break one or more rules; `errors` lists every one."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def _special_message(err: Mapping[str, Any]) -> str | None:
    """What the scheduler's translator (scheduler.config.field_message) cannot know: ranges
    that read better as one, and where an argument that is not managed belongs."""
    kind = err["type"]
    field = str(err["loc"][0]) if err["loc"] else ""
    if field == "gpu_memory_utilization" and kind in ("greater_than", "less_than_equal"):
        return f"must be in (0, 1], got {err['input']}"
    if field == "port" and kind in ("greater_than_equal", "less_than_equal"):
        return "must be between 1 and 65535"
    if kind == "extra_forbidden":
        return "is not a managed vLLM argument; put it in extra_args as a flag"
    return None


def _schema_errors(exc: ValidationError) -> list[FieldError]:
    return field_errors(exc, _special_message)


def _value_errors(args: LaunchArgs) -> list[FieldError]:
    """vLLM's cross-field rules (vllm/config: SchedulerConfig._verify_args)."""
    errors: list[FieldError] = []
    if args.model.startswith("-"):
        errors.append(FieldError("model", "must be a model name or path, not a flag"))
    tokens, model_len, seqs = args.max_num_batched_tokens, args.max_model_len, args.max_num_seqs
    # vLLM rejects this pairing unless chunked prefill splits long prompts over several steps.
    # Only an explicit `true` counts: whether chunked prefill is on by default depends on the
    # vLLM release and the model, and the rule must hold on every one of them.
    if (
        tokens is not None
        and model_len is not None
        and tokens < model_len
        and args.enable_chunked_prefill is not True
    ):
        errors.append(
            FieldError(
                "max_num_batched_tokens",
                f"({tokens}) is smaller than max_model_len ({model_len}); vLLM refuses this unless "
                "enable_chunked_prefill is true. "
                "Raise max_num_batched_tokens or lower max_model_len",
            )
        )
    if tokens is not None and seqs is not None and tokens < seqs:
        errors.append(
            FieldError(
                "max_num_batched_tokens",
                f"({tokens}) must be greater than or equal to max_num_seqs ({seqs})",
            )
        )
    errors.extend(_extra_arg_errors(args.extra_args))
    return errors


def _extra_arg_errors(extra: list[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, item in enumerate(extra):
        path = f"extra_args.{index}"
        if not item.strip():
            errors.append(FieldError(path, "must not be empty"))
            continue
        # "--flag=value" and a flag pasted together with its value both name the flag first.
        flag = item.split("=", 1)[0].split()[0]
        if flag in FORBIDDEN_EXTRA_FLAGS:
            errors.append(FieldError(path, f"{flag} {FORBIDDEN_EXTRA_FLAGS[flag]}"))
        elif flag in _MANAGED_FLAGS:
            errors.append(
                FieldError(
                    path, f"{flag} is set by the {_MANAGED_FLAGS[flag]} field; use that field"
                )
            )
    return errors


def validate_args(data: Mapping[str, Any]) -> LaunchArgs:
    """Validate decoded JSON; raise `ArgsError` listing every broken rule, each naming a field.

    A JSON null counts as "not set" (the engine's default)."""
    if not isinstance(data, Mapping):
        raise ArgsError([FieldError("(root)", "must be an object")])
    given = {key: value for key, value in data.items() if value is not None}
    try:
        args = LaunchArgs.model_validate(given)
    except ValidationError as exc:
        raise ArgsError(_schema_errors(exc)) from None
    errors = _value_errors(args)
    if errors:
        raise ArgsError(errors)
    return args


def args_to_dict(args: LaunchArgs) -> dict[str, Any]:
    """JSON-ready, holding only the fields that were set (unset ones render no flag)."""
    data = args.model_dump(mode="json", exclude_none=True)
    if not data.get("extra_args"):
        data.pop("extra_args", None)
    return data


def _value_text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def render_argv(args: LaunchArgs) -> list[str]:
    """The exact `vllm serve` argv: the model, then one flag per set field in schema order
    (booleans as --enable-x / --no-enable-x), then extra_args verbatim."""
    argv = ["vllm", "serve", args.model]
    for field in FIELD_NAMES:
        if field in ("model", "extra_args"):
            continue
        value = getattr(args, field)
        if value is None:
            continue
        flag = flag_of(field)
        if field in BOOLEAN_FIELDS:
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            argv.extend([flag, _value_text(value)])
    argv.extend(args.extra_args)
    return argv


def render_command(args: LaunchArgs) -> str:
    """The argv as one shell-safe line."""
    return shlex.join(render_argv(args))


def default_args() -> dict[str, Any]:
    """A sensible starting profile: seed 000's flags with the real policy flag."""
    return {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "served_model_name": "llama-8b",
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.85,
        "max_model_len": 8192,
        "max_num_seqs": 32,
        "max_num_batched_tokens": 16384,
        "scheduling_policy": "priority",
        "enable_prefix_caching": True,
        "port": 8000,
    }
