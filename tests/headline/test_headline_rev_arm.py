"""Arm (r): arm (d) with the gateway as at another git revision, so that a change to the gateway
is judged against its parent in the same paired rounds (perf.headline --gateway-rev)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.bench.headline.arms import Setup, run_arm
from console.bench.headline.catalog import standard_arms
from console.bench.headline.options import check
from console.bench.headline.procs import GATEWAY_PACKAGES, gateway_source, run_gateway
from console.bench.headline.workload import records_needed, write_prompts
from perf.headline.__main__ import build_parser


def test_arm_r_is_arm_d_with_the_gateway_from_a_revision() -> None:
    arms = {arm.key: arm for arm in standard_arms()}
    d, r = arms["d"], arms["r"]
    assert (r.policy, r.tier_config, r.send_priority) == (d.policy, d.tier_config, False)
    assert r.at_rev and not d.at_rev and r.name != d.name


def test_arm_r_and_gateway_rev_go_together() -> None:
    parser = build_parser()
    assert check(parser.parse_args(["--arms", "bdr", "--gateway-rev", "HEAD~1"])) is None
    for argv in (["--arms", "bdr"], ["--arms", "bd", "--gateway-rev", "HEAD"]):
        problem = check(parser.parse_args(argv))
        assert problem is not None and "--gateway-rev" in problem


def test_an_unknown_revision_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--gateway-rev no-such-rev-0000"):
        gateway_source("no-such-rev-0000", tmp_path)
    assert not (tmp_path / "gateway-rev").exists()


def test_the_gateway_runs_from_the_revision_it_was_given(tmp_path: Path) -> None:
    """The archive holds the gateway's packages, and the process imports them from there, not
    from this checkout: the archive's entry point is broken on purpose and the start fails."""
    source = gateway_source("HEAD", tmp_path)
    assert sorted(p.name for p in source.iterdir()) == sorted(GATEWAY_PACKAGES)
    assert (source / "scheduler" / "selection.py").is_file()
    (source / "gpu_agent" / "__main__.py").write_text('raise SystemExit("the revision ran")\n')
    config = next(a for a in standard_arms() if a.key == "r").tier_config
    assert config is not None
    with (
        pytest.raises(RuntimeError, match="the revision ran"),
        run_gateway("http://127.0.0.1:9", config, tmp_path, "rev", source),
    ):
        pass


@pytest.mark.slow
def test_arm_r_runs_end_to_end_on_the_simulator(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", records_needed(8.0, 3.0), seed=5)
    setup = Setup(8.0, 2.0, 1.0, 5, 1.0, prompts, tmp_path)
    arm = next(a for a in standard_arms() if a.key == "r")
    with pytest.raises(ValueError, match="--gateway-rev"):
        run_arm(arm, setup)
    setup.gateway_source = gateway_source("HEAD", tmp_path)
    outcome = run_arm(arm, setup)
    overall = outcome.tier_row("overall")
    assert overall["errors"] == 0 and overall["completed"] == overall["requests"] > 0
    record = outcome.to_json()
    assert record["via_gateway"] and record["gateway_at_rev"]
    assert (tmp_path / f"{arm.name}-gateway.log").exists()
