"""The heartbeat wire format (docs/protocol.md), as pydantic models.

Pydantic rather than a DRF serializer: a beat may carry 600 samples and arrives every second
from every agent, and pydantic validates straight from the raw bytes several times faster.
Strict mode: a string where a number belongs is a 400 naming the field, not a silent cast.
Unknown keys are ignored so agents can grow the format first.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from console.fleet.urlrule import url_problem

MAX_BODY_BYTES = 1024 * 1024
MAX_SAMPLES = 600


def _text(limit: int) -> Any:
    """Free text from the node (stderr tails, details): cut to `limit`, never refused, so one
    long error message cannot make the agent's every beat fail."""
    return Annotated[str, AfterValidator(lambda value: value[:limit])]


def _listen_url(value: str) -> str:
    """Empty (not listening yet) or a URL the console can make the node's gateway endpoint of."""
    problem = url_problem(value) if value else None
    if problem is not None:
        raise ValueError(problem)
    return value


class WireModel(BaseModel):
    """Base of every heartbeat model (api/schema.py documents them in OpenAPI 3.0 form)."""


class _In(WireModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class AppliedIn(_In):
    tier_config: int | None = None
    launch_profile: int | None = None


class ApplyErrorIn(_In):
    # A version id for configs; the keys_version (a string) for gateway keys.
    version: int | str | None = None
    error: _text(20000) | None = ""  # type: ignore[valid-type]


class HealthIn(_In):
    gateway: str | None = Field(default="", max_length=20)
    engine: str | None = Field(default="", max_length=20, description="ok | starting | down")
    detail: _text(2000) | None = ""  # type: ignore[valid-type]


class EngineOptionIn(_In):
    """One option of the engine's own argument parser (gpu_agent/engine_probe.py)."""

    flags: list[Annotated[str, Field(max_length=100)]] = Field(default_factory=list, max_length=8)
    dest: str | None = Field(default=None, max_length=100)
    kind: Literal["store", "flag", "bool", "append", "positional"] = "store"
    nargs: int | str | None = None
    type: Literal["int", "float"] | None = None
    choices: list[str | int | float | bool | None] | None = Field(default=None, max_length=500)


class EngineReportIn(_In):
    """The engine's version and accepted options; sent until the reply echoes its digest."""

    engine: str = Field(default="", max_length=20)
    version: str | None = Field(default=None, max_length=100)
    allow_abbrev: bool = True
    options: list[EngineOptionIn] = Field(default_factory=list, max_length=2000)
    error: _text(2000) | None = None  # type: ignore[valid-type]
    python: str | None = Field(default=None, max_length=300)
    digest: str = Field(default="", max_length=64)


class EngineIn(_In):
    # Null while a managed engine is still starting (its model is not known yet).
    url: str | None = Field(default="", max_length=300)
    model: str | None = Field(default="", max_length=200)
    simulated: bool = False
    args: dict[str, object] = Field(default_factory=dict)
    version: str | None = Field(default=None, max_length=100)
    report_digest: str | None = Field(default=None, max_length=64)
    report: EngineReportIn | None = None
    # The agent's word where a CPU vLLM's OpenMP threads hold every core (gpu_agent.cores).
    cores_warning: str | None = Field(default=None, max_length=1000)


class GpuIn(_In):
    index: int
    name: str | None = ""
    util: float | None = None
    mem_used_bytes: int | float | None = None
    mem_total_bytes: int | float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None


class EngineSampleIn(_In):
    kv_cache_usage: float | None = None
    running: int | None = None
    waiting: int | None = None
    prefix_hit_rate: float | None = None
    preemptions_total: int | None = None


class TierSampleIn(_In):
    depth: int | None = None
    in_flight: int | None = None
    effective_wait_s: float | None = None
    finished: int | None = None
    errors: int | None = None
    rejected: int | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None


class SampleIn(_In):
    ts: float = Field(gt=0, lt=4102444800, description="Unix seconds (UTC)")
    gpu_source: Literal["nvml", "simulated", "none"]
    gpus: list[GpuIn] = Field(default_factory=list)
    engine: EngineSampleIn = Field(default_factory=EngineSampleIn)
    tiers: dict[str, TierSampleIn] = Field(default_factory=dict)


class HeartbeatIn(_In):
    node: str | int | None = Field(
        default=None, description="Optional: the node's name or id; must be the token's node"
    )
    agent_version: str = Field(default="", max_length=40)
    mode: Literal["managed", "attached"]
    listen_url: Annotated[str, AfterValidator(_listen_url)] = Field(default="", max_length=300)
    applied: AppliedIn = Field(default_factory=AppliedIn)
    apply_errors: dict[str, ApplyErrorIn] = Field(default_factory=dict)
    keys_version: str = Field(default="", max_length=64)
    health: HealthIn = Field(default_factory=HealthIn)
    engine: EngineIn = Field(default_factory=EngineIn)
    samples: list[SampleIn] = Field(default_factory=list, max_length=MAX_SAMPLES)


# Reply models: used for the OpenAPI schema and as the reply's single definition.
class DesiredTierConfigOut(WireModel):
    id: int
    name: str | None = None
    config: dict[str, object] | None = None


class DesiredLaunchProfileOut(WireModel):
    id: int
    name: str | None = None
    args: dict[str, object] | None = None
    argv: list[str] | None = None


class DesiredOut(WireModel):
    tier_config: DesiredTierConfigOut | None
    launch_profile: DesiredLaunchProfileOut | None


class NodeRefOut(WireModel):
    id: int
    name: str


class GatewayKeyOut(WireModel):
    name: str
    sha256: str
    tiers: list[str]
    default_tier: str


class HeartbeatOut(WireModel):
    node: NodeRefOut
    heartbeat_interval_s: float
    desired: DesiredOut
    keys_version: str
    gateway_keys: list[GatewayKeyOut] | None = Field(
        default=None, description="Only when keys_version differs"
    )


def error_fields(exc: ValidationError) -> dict[str, list[str]]:
    """Pydantic errors as DRF-style `{"samples.3.ts": ["Input should be a valid number"]}`."""
    out: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in err["loc"]) or "body"
        out.setdefault(field, []).append(err["msg"])
    return out
