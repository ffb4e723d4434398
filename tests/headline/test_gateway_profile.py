"""perf.gateway_profile: where the gateway's CPU goes, by py-spy's samples."""

from __future__ import annotations

import json

import pytest

from perf import gateway_profile

RAW = [
    "<module> (gpu_agent/__main__.py:74);Runner.run (asyncio/runners.py:118) 50",
    "Runner.run (asyncio/runners.py:118);Gateway.handle (gpu_agent/gateway.py:199);"
    "Dispatcher.poll (scheduler/dispatcher.py:307) 10",
    "Gateway._forward (gpu_agent/gateway.py:277);"
    "RequestResponseCycle.send (.venv/lib/python3.11/site-packages/uvicorn/protocols/http/"
    "httptools_impl.py:552) 30",
    "Gateway._forward (gpu_agent/gateway.py:284) 6",
    "f (somewhere/else.py:1) 4",
    "garbage",
]


def test_samples_go_to_the_loop_or_the_innermost_module_we_name() -> None:
    out = gateway_profile.shares(RAW)
    assert out == {
        gateway_profile.LOOP: 0.5,
        "uvicorn/protocols/http/httptools_impl.py": 0.3,
        "scheduler/dispatcher.py": 0.1,
        "gpu_agent/gateway.py": 0.06,
        "other": 0.04,
    }
    assert gateway_profile.shares([]) == {}


def test_a_profile_of_the_gateway_in_front_of_the_simulator(tmp_path) -> None:
    """Real processes: the simulator, the gateway with the seed's tier config, py-spy and the
    load generator; the gateway's samples include its scheduler and its upstream client."""
    argv = ["--rate", "20", "--duration", "4", "--warmup", "1", "--workdir", str(tmp_path)]
    assert gateway_profile.main([*argv, "--json", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["command"] == ["python", "-m", "perf.gateway_profile", *argv, "--json",
                              str(tmp_path / "out.json")]  # fmt: skip
    assert out["engine"] == "sim"
    assert out["requests_per_s"] > 10
    assert 0 < out["gateway_cores"] < 1
    assert out["cpu_ms_per_request"] > 0
    samples = out["samples"]
    assert sum(samples.values()) == pytest.approx(1.0)
    assert samples[gateway_profile.LOOP] > 0
    # the upstream client is two modules (the pool and one connection); a 4 s profile samples
    # at least one of them, not always both
    assert {"gpu_agent/upstream.py", "gpu_agent/upstream_conn.py"} & samples.keys()


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        gateway_profile.main(["--rate", "0"])
    assert exit_.value.code == 2
    assert "--rate and --duration must be > 0" in capsys.readouterr().err
