"""Command line and hardware profile of the simulated engine.

The vLLM flags keep vLLM's names, defaults and validation rules, so that a launch profile that
works here works with `vllm serve` and the other way round. Everything that only the simulator
needs starts with `--sim-`.

Accepted for compatibility but not modelled: `--tensor-parallel-size`, `--pipeline-parallel-size`
and `--dtype` (pick a preset, or `--sim-*` figures, for the whole GPU set instead). Differences
from vLLM: `--host` defaults to 127.0.0.1, not every interface; `--max-model-len` defaults to
8192 rather than the model's own limit. Output length without `ignore_eos` is drawn from the seed
with mean `--sim-eos-mean-tokens`; `temperature` is accepted and does not change the output.

Preset numbers (rough, from public hardware facts; they only need to be the right size):

- ``llama-8b-h100-80g``: Llama-3-8B in bf16 on one H100 SXM 80 GB.
  GPU memory 81,559 MiB (what nvidia-smi reports); weights 8.03e9 params x 2 bytes = 16.06 GB;
  KV per token 32 layers x 8 KV heads x 128 dim x 2 (K and V) x 2 bytes = 128 KiB.
  Prefill is compute-bound: 2 x 8e9 FLOP/token at ~50% of 989 dense bf16 TFLOP/s = ~32 us/token
  (35 us used). Decode is bandwidth-bound: reading 16 GB of weights at 3.35 TB/s is ~4.8 ms,
  plus kernel launches = 6 ms base per step; reading 128 KiB of KV per context token at
  3.35 TB/s = ~39 ns per context token per step; ~20 us per sequence for sampling and the
  growing GEMMs. CPU gap between steps (scheduling, detokenising) ~2.5 ms at large batch.
- ``llama-70b-tp4``: Llama-3-70B bf16 on 4 x H100 80 GB (tensor parallel 4).
  Weights 70.6e9 x 2 = 141 GB; KV per token 80 layers x 8 x 128 x 2 x 2 = 320 KiB (all ranks);
  prefill 141 GFLOP/token over 4 GPUs at ~45% = ~80 us/token; base step 35 GB per GPU at
  3.35 TB/s plus all-reduces ~14 ms; ~24 ns per context token; CPU gap ~3 ms.
- ``tiny-test``: a toy GPU with about 8.6k tokens of KV and sub-millisecond costs, so tests reach
  KV pressure with a handful of requests and finish fast.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields, replace
from typing import NoReturn

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class HardwareProfile:
    """Costs of the modelled GPU. Times are in seconds, sizes in bytes."""

    gpu_memory_bytes: int
    weight_bytes: int
    kv_bytes_per_token: int
    prefill_s_per_token: float
    decode_s_per_seq: float
    attention_s_per_context_token: float
    cpu_gap_s: float
    base_step_s: float


PRESETS: dict[str, HardwareProfile] = {
    "llama-8b-h100-80g": HardwareProfile(
        gpu_memory_bytes=81_559 * MIB,
        weight_bytes=16_060_000_000,
        kv_bytes_per_token=32 * 8 * 128 * 2 * 2,
        prefill_s_per_token=35e-6,
        decode_s_per_seq=20e-6,
        attention_s_per_context_token=39e-9,
        cpu_gap_s=2.5e-3,
        base_step_s=6e-3,
    ),
    "llama-70b-tp4": HardwareProfile(
        gpu_memory_bytes=4 * 81_559 * MIB,
        weight_bytes=141_200_000_000,
        kv_bytes_per_token=80 * 8 * 128 * 2 * 2,
        prefill_s_per_token=80e-6,
        decode_s_per_seq=40e-6,
        attention_s_per_context_token=24e-9,
        cpu_gap_s=3e-3,
        base_step_s=14e-3,
    ),
    "tiny-test": HardwareProfile(
        gpu_memory_bytes=GIB,
        # 0.9 x 1 GiB leaves ~8.9 MB for KV after these weights: 541 blocks of 16 tokens
        # at 1 KiB/token (8,656 tokens), just above the default max_model_len.
        weight_bytes=957_500_000,
        kv_bytes_per_token=1024,
        prefill_s_per_token=10e-6,
        decode_s_per_seq=50e-6,
        attention_s_per_context_token=100e-9,
        cpu_gap_s=0.5e-3,
        base_step_s=1e-3,
    ),
}
DEFAULT_PRESET = "llama-8b-h100-80g"
SCHEDULING_POLICIES = ("fcfs", "priority")
REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True)
class SimConfig:
    """Everything the engine and the server read, resolved once at start."""

    model: str
    served_model_names: tuple[str, ...]
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 8192
    gpu_memory_utilization: float = 0.9
    scheduling_policy: str = "fcfs"
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    async_scheduling: bool = True
    block_size: int = 16
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    dtype: str = "auto"
    host: str = "127.0.0.1"
    port: int = 8000
    seed: int = 0
    preset: str = DEFAULT_PRESET
    hardware: HardwareProfile = PRESETS[DEFAULT_PRESET]
    time_scale: float = 1.0
    sim_seed: int = 0
    eos_mean_tokens: int = 256
    wire_timestamps: bool = False
    # Chat answers that think first: this many output tokens as reasoning deltas, in vLLM's
    # field (`reasoning_content`; newer releases name it `reasoning`).
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning_content"

    @property
    def model_name(self) -> str:
        """The name used in responses and metric labels (vLLM: the first served name)."""
        return self.served_model_names[0]

    @property
    def num_gpu_blocks(self) -> int:
        kv_budget = self.hardware.gpu_memory_bytes * self.gpu_memory_utilization
        kv_budget -= self.hardware.weight_bytes
        return max(0, int(kv_budget // (self.hardware.kv_bytes_per_token * self.block_size)))


# Hardware flag name -> HardwareProfile field; the flags override the preset's values.
_HARDWARE_FLAGS = {f"--sim-{f.name.replace('_', '-')}": f for f in fields(HardwareProfile)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_agent.sim",
        description="Simulated vLLM engine: same flags and HTTP API as `vllm serve`.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a simulated model")
    serve.add_argument("model")
    bool_flag = argparse.BooleanOptionalAction
    serve.add_argument("--max-num-seqs", type=int, default=256)
    serve.add_argument("--max-num-batched-tokens", type=int, default=None)
    serve.add_argument("--max-model-len", type=int, default=8192)
    serve.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    serve.add_argument("--scheduling-policy", choices=SCHEDULING_POLICIES, default="fcfs")
    serve.add_argument("--enable-prefix-caching", action=bool_flag, default=True)
    serve.add_argument("--enable-chunked-prefill", action=bool_flag, default=True)
    serve.add_argument("--async-scheduling", action=bool_flag, default=True)
    serve.add_argument("--block-size", type=int, choices=(8, 16, 32, 64, 128), default=16)
    serve.add_argument("--served-model-name", nargs="+", default=None)
    serve.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    serve.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    serve.add_argument(
        "--dtype",
        choices=("auto", "half", "float16", "bfloat16", "float", "float32"),
        default="auto",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument("--sim-preset", choices=sorted(PRESETS), default=DEFAULT_PRESET)
    serve.add_argument(
        "--sim-time-scale",
        type=float,
        default=1.0,
        help="wall seconds per modelled second (2 = twice as slow)",
    )
    serve.add_argument(
        "--sim-seed",
        type=int,
        default=None,
        help="seed of output words and EOS positions (default: --seed)",
    )
    serve.add_argument(
        "--sim-eos-mean-tokens",
        type=int,
        default=256,
        help="mean output length when ignore_eos is false",
    )
    serve.add_argument(
        "--sim-reasoning-tokens",
        type=int,
        default=0,
        metavar="N",
        help="chat answers start with N reasoning tokens (delta.reasoning_content), as a "
        "thinking model behind a --reasoning-parser does; a request's chat_template_kwargs "
        "enable_thinking=false turns it off",
    )
    serve.add_argument(
        "--sim-reasoning-field",
        choices=REASONING_FIELDS,
        default=REASONING_FIELDS[0],
        help="the delta field reasoning goes in (vLLM renamed reasoning_content to reasoning)",
    )
    serve.add_argument(
        "--sim-wire-timestamps",
        action="store_true",
        help="record each request's kernel receive time for /sim/v1/requests (runs the "
        "server on the stock asyncio loop)",
    )
    for flag, field in _HARDWARE_FLAGS.items():
        kind = int if field.type in ("int", int) else float
        serve.add_argument(flag, type=kind, default=None, help="overrides the preset")
    return parser


def parse_args(argv: list[str] | None = None) -> SimConfig:
    """Parse and validate; invalid combinations exit with status 2 like argparse errors."""
    parser = build_parser()
    args = parser.parse_args(argv)

    def fail(message: str) -> NoReturn:
        parser.error(message)  # prints usage and the message, exits with status 2

    if args.max_num_batched_tokens is None:
        # vLLM: chunked prefill gets a fixed budget, otherwise a whole prompt must fit a step.
        args.max_num_batched_tokens = (
            8192 if args.enable_chunked_prefill else max(args.max_model_len, 2048)
        )
    if not 0 < args.gpu_memory_utilization <= 1:
        fail(f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    for name in (
        "max_num_seqs",
        "max_model_len",
        "max_num_batched_tokens",
        "tensor_parallel_size",
        "pipeline_parallel_size",
    ):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')} must be at least 1")
    if not args.enable_chunked_prefill and args.max_num_batched_tokens < args.max_model_len:
        fail(
            f"max_num_batched_tokens ({args.max_num_batched_tokens}) is smaller than "
            f"max_model_len ({args.max_model_len}). This effectively limits the maximum "
            "sequence length to max_num_batched_tokens; please increase it or enable "
            "chunked prefill (--enable-chunked-prefill)."
        )
    if args.max_num_batched_tokens < args.max_num_seqs:
        fail(
            f"max_num_batched_tokens ({args.max_num_batched_tokens}) must be greater than or "
            f"equal to max_num_seqs ({args.max_num_seqs})."
        )
    if not math.isfinite(args.sim_time_scale) or args.sim_time_scale <= 0:
        fail("--sim-time-scale must be a positive number")
    if args.sim_eos_mean_tokens < 1:
        fail("--sim-eos-mean-tokens must be at least 1")
    if args.sim_reasoning_tokens < 0:
        fail("--sim-reasoning-tokens must be zero or more")
    for field in fields(HardwareProfile):
        value = getattr(args, "sim_" + field.name)
        if value is None:
            continue
        # Sizes the model divides by must be positive; weights and costs may be zero.
        least = 1 if field.name in ("gpu_memory_bytes", "kv_bytes_per_token") else 0
        if not math.isfinite(value) or value < least:
            bound = "positive" if least else "zero or more"
            fail(f"--sim-{field.name.replace('_', '-')} must be {bound}, got {value}")

    overrides = {
        field.name: getattr(args, "sim_" + field.name)
        for field in fields(HardwareProfile)
        if getattr(args, "sim_" + field.name) is not None
    }
    hardware = replace(PRESETS[args.sim_preset], **overrides)
    config = SimConfig(
        model=args.model,
        served_model_names=tuple(args.served_model_name or [args.model]),
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        scheduling_policy=args.scheduling_policy,
        enable_prefix_caching=args.enable_prefix_caching,
        enable_chunked_prefill=args.enable_chunked_prefill,
        async_scheduling=args.async_scheduling,
        block_size=args.block_size,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        dtype=args.dtype,
        host=args.host,
        port=args.port,
        seed=args.seed,
        preset=args.sim_preset,
        hardware=hardware,
        time_scale=args.sim_time_scale,
        sim_seed=args.seed if args.sim_seed is None else args.sim_seed,
        eos_mean_tokens=args.sim_eos_mean_tokens,
        wire_timestamps=args.sim_wire_timestamps,
        reasoning_tokens=args.sim_reasoning_tokens,
        reasoning_field=args.sim_reasoning_field,
    )
    if config.num_gpu_blocks < 1:
        fail(
            "No available memory for the cache blocks: weights "
            f"({hardware.weight_bytes} bytes) exceed gpu_memory_utilization x GPU memory."
        )
    # A request of max_model_len tokens must fit in the KV cache, as vLLM checks at start-up.
    if config.num_gpu_blocks * config.block_size < config.max_model_len:
        fail(
            f"The model's max seq len ({config.max_model_len}) is larger than the maximum "
            f"number of tokens that can be stored in KV cache "
            f"({config.num_gpu_blocks * config.block_size}). Try increasing "
            "--gpu-memory-utilization or decreasing --max-model-len."
        )
    return config
