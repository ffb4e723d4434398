"""The launch argument schema: vLLM's own rules, errors naming the field, the exact argv."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from console.tuning.vllm_args import (
    ArgsError,
    args_to_dict,
    render_argv,
    render_command,
    validate_args,
)


def errors_of(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ArgsError) as info:
        validate_args(data)
    return {e.path: e.message for e in info.value.errors}


def test_it_renders_the_exact_argv_in_schema_order() -> None:
    args = validate_args(
        {
            "port": 8001,
            "model": "/models/m",
            "enable_prefix_caching": True,
            "enable_chunked_prefill": False,
            "async_scheduling": True,
            "gpu_memory_utilization": 0.85,
            "tensor_parallel_size": 2,
            "pipeline_parallel_size": 1,
            "dtype": "bfloat16",
            "served_model_name": "m",
            "max_model_len": 4096,
            "max_num_seqs": 32,
            "max_num_batched_tokens": 8192,
            "scheduling_policy": "priority",
            "block_size": 16,
            "host": "0.0.0.0",
            "extra_args": ["--enable-log-requests", "--seed=7"],
        }
    )
    assert render_argv(args) == [
        "vllm",
        "serve",
        "/models/m",
        "--served-model-name",
        "m",
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "1",
        "--dtype",
        "bfloat16",
        "--gpu-memory-utilization",
        "0.85",
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "32",
        "--max-num-batched-tokens",
        "8192",
        "--scheduling-policy",
        "priority",
        "--enable-prefix-caching",
        "--no-enable-chunked-prefill",
        "--block-size",
        "16",
        "--host",
        "0.0.0.0",
        "--port",
        "8001",
        "--async-scheduling",
        "--enable-log-requests",
        "--seed=7",
    ]


def test_unset_arguments_render_no_flag() -> None:
    assert render_argv(validate_args({"model": "m"})) == ["vllm", "serve", "m"]
    assert render_argv(validate_args({"model": "m", "enable_prefix_caching": None})) == [
        "vllm",
        "serve",
        "m",
    ]


def test_false_booleans_render_the_no_form() -> None:
    argv = render_argv(
        validate_args({"model": "m", "enable_prefix_caching": False, "async_scheduling": False})
    )
    assert argv[3:] == ["--no-enable-prefix-caching", "--no-async-scheduling"]


def test_the_command_is_shell_quoted_and_splits_back_into_the_argv() -> None:
    args = validate_args({"model": "/models/my model", "extra_args": ["--chat-template", "a'b c"]})
    command = render_command(args)
    assert command == "vllm serve '/models/my model' --chat-template 'a'\"'\"'b c'"
    assert shlex.split(command) == render_argv(args)


def test_it_refuses_the_seed_flag_scheduler_policy_and_suggests_the_real_one() -> None:
    errors = errors_of({"model": "m", "extra_args": ["--scheduler-policy", "priority"]})
    assert "--scheduling-policy" in errors["extra_args.0"]
    errors = errors_of({"model": "m", "extra_args": ["--scheduler-policy=priority"]})
    assert "--scheduling-policy" in errors["extra_args.0"]


def test_it_refuses_disable_log_requests_and_suggests_enable_log_requests() -> None:
    errors = errors_of({"model": "m", "extra_args": ["--seed", "1", "--disable-log-requests"]})
    assert set(errors) == {"extra_args.2"}
    assert "--enable-log-requests" in errors["extra_args.2"]


def test_extra_args_may_not_set_a_managed_flag_twice() -> None:
    errors = errors_of(
        {
            "model": "m",
            "extra_args": ["--max-num-seqs", "8", "-tp", "2", "--no-enable-prefix-caching"],
        }
    )
    assert "max_num_seqs" in errors["extra_args.0"]
    assert "tensor_parallel_size" in errors["extra_args.2"]
    assert "enable_prefix_caching" in errors["extra_args.4"]


def test_batched_tokens_below_model_len_is_refused_without_chunked_prefill() -> None:
    data = {"model": "m", "max_model_len": 8192, "max_num_batched_tokens": 4096}
    assert "max_model_len" in errors_of(data)["max_num_batched_tokens"]
    assert (
        "max_model_len"
        in errors_of({**data, "enable_chunked_prefill": False})["max_num_batched_tokens"]
    )
    validate_args({**data, "enable_chunked_prefill": True})  # chunked prefill splits long prompts


def test_batched_tokens_below_max_num_seqs_is_refused_even_with_chunked_prefill() -> None:
    errors = errors_of(
        {
            "model": "m",
            "max_num_seqs": 256,
            "max_num_batched_tokens": 128,
            "enable_chunked_prefill": True,
        }
    )
    assert "max_num_seqs (256)" in errors["max_num_batched_tokens"]
    validate_args({"model": "m", "max_num_seqs": 256, "max_num_batched_tokens": 256})


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("gpu_memory_utilization", 0, "(0, 1]"),
        ("gpu_memory_utilization", 1.01, "(0, 1]"),
        ("gpu_memory_utilization", "0.9", "number"),
        ("dtype", "fp8", "'bfloat16'"),
        ("scheduling_policy", "lifo", "'priority'"),
        ("block_size", 24, "16"),
        ("port", 0, "65535"),
        ("port", 65536, "65535"),
        ("tensor_parallel_size", 0, "must be >= 1"),
        ("max_num_seqs", 2.5, "integer"),
        ("enable_prefix_caching", "yes", "true or false"),
        ("extra_args", "--foo", "list"),
        ("scheduler_policy", "priority", "not a managed"),
    ],
)
def test_each_broken_value_is_reported_on_its_field(field: str, value: Any, words: str) -> None:
    errors = errors_of({"model": "m", field: value})
    assert field in errors, errors
    assert words in errors[field]


def test_every_error_is_reported_at_once() -> None:
    errors = errors_of({"dtype": "x", "port": -1, "block_size": 3})
    assert set(errors) == {"model", "dtype", "port", "block_size"}
    assert errors["model"] == "required field is missing"  # as the scheduler says it


def test_gpu_memory_utilization_may_be_exactly_one() -> None:
    assert render_argv(validate_args({"model": "m", "gpu_memory_utilization": 1}))[3:] == [
        "--gpu-memory-utilization",
        "1",
    ]


def test_args_to_dict_keeps_only_what_was_set() -> None:
    assert args_to_dict(validate_args({"model": "m", "port": 9000, "host": None})) == {
        "model": "m",
        "port": 9000,
    }


def test_the_simulator_accepts_the_rendered_flags() -> None:
    from gpu_agent.sim.config import parse_args

    args = validate_args(
        {
            "model": "m",
            "served_model_name": "m8",
            "max_model_len": 4096,
            "max_num_seqs": 64,
            "max_num_batched_tokens": 8192,
            "scheduling_policy": "priority",
            "enable_prefix_caching": False,
            "enable_chunked_prefill": True,
            "block_size": 32,
            "gpu_memory_utilization": 0.8,
            "tensor_parallel_size": 1,
            "dtype": "bfloat16",
            "async_scheduling": False,
            "port": 8123,
            "host": "127.0.0.1",
        }
    )
    sim = parse_args(render_argv(args)[1:])  # the simulator's CLI starts at "serve"
    assert (
        sim.max_num_seqs,
        sim.scheduling_policy,
        sim.enable_prefix_caching,
        sim.block_size,
        sim.port,
    ) == (64, "priority", False, 32, 8123)


def test_types_bounds_and_missing_fields_read_as_the_scheduler_words_them() -> None:
    from scheduler import ConfigError, parse_config

    with pytest.raises(ConfigError) as tier_error:
        parse_config({"scheduler": {"queues": {"online": {"max_batch_size": "8"}}}})
    tier_messages = {e.message for e in tier_error.value.errors}
    errors = errors_of({"tensor_parallel_size": 0, "max_num_seqs": "8"})
    assert errors["max_num_seqs"] == "must be an integer" and "must be an integer" in tier_messages
    assert "required field is missing" in tier_messages and errors["model"] == (
        "required field is missing"
    )
    assert errors["tensor_parallel_size"] == "must be >= 1"
