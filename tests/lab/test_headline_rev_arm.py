"""Arm (r): arm (d) with the gateway as at another git revision, so that a change to the gateway
is judged against its parent in the same paired rounds (lab.headline --gateway-rev)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.headline.__main__ import build_parser, catalog, check_lab
from lab.headline.arms import LabArm, lab_arms
from lab.headline.procs import GATEWAY_PACKAGES, gateway_source, run_gateway


def test_arm_r_is_arm_d_with_the_gateway_from_a_revision() -> None:
    arms = {arm.key: arm for arm in lab_arms()}
    d, r = arms["d"], arms["r"]
    assert (r.policy, r.tier_config, r.send_priority) == (d.policy, d.tier_config, False)
    assert isinstance(r, LabArm) and r.at_rev and r.source is None and r.name != d.name
    with pytest.raises(ValueError, match="--gateway-rev"):  # no revision, no gateway to start
        r.front("http://127.0.0.1:9", [], Path("."))


def test_the_lab_gives_arm_r_the_revisions_packages(tmp_path: Path) -> None:
    assert catalog(None, tmp_path, print) == lab_arms()
    logged: list[str] = []
    arms = {arm.key: arm for arm in catalog("HEAD", tmp_path, logged.append)}
    r = arms["r"]
    assert isinstance(r, LabArm) and r.source == (tmp_path / "gateway-rev").resolve()
    assert all(getattr(a, "source", None) is None for k, a in arms.items() if k != "r")
    assert logged and "HEAD" in logged[0]


def test_arm_r_and_gateway_rev_go_together() -> None:
    parser = build_parser()
    assert check_lab(parser.parse_args(["--arms", "bdr", "--gateway-rev", "HEAD~1"])) is None
    for argv in (["--arms", "bdr"], ["--arms", "bd", "--gateway-rev", "HEAD"]):
        problem = check_lab(parser.parse_args(argv))
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
    config = next(a for a in lab_arms() if a.key == "r").tier_config
    assert config is not None
    with (
        pytest.raises(RuntimeError, match="the revision ran"),
        run_gateway("http://127.0.0.1:9", config, tmp_path, "rev", source=source),
    ):
        pass
