from __future__ import annotations

from gpu_agent.supervisor import EngineSupervisor, engine_url_of, with_endpoint


def test_a_profile_keeps_the_nodes_engine_port() -> None:
    profile = ["vllm", "serve", "m", "--port", "8000", "--max-num-seqs", "64"]
    argv = with_endpoint(profile, None, "8101")
    assert argv == ["vllm", "serve", "m", "--max-num-seqs", "64", "--port", "8101"]
    assert engine_url_of(argv) == "http://127.0.0.1:8101"


def test_inline_flags_are_replaced_and_absent_ones_left_alone() -> None:
    assert with_endpoint(
        ["vllm", "serve", "m", "--port=9", "--host=0.0.0.0"], "127.0.0.2", "81"
    ) == ["vllm", "serve", "m", "--host", "127.0.0.2", "--port", "81"]
    assert with_endpoint(["vllm", "serve", "m", "--port", "9"], None, None) == [
        "vllm",
        "serve",
        "m",
        "--port",
        "9",
    ]


def test_the_supervisor_remembers_the_start_up_address() -> None:
    sup = EngineSupervisor(["vllm", "serve", "m", "--port", "8102"], simulate=True)
    assert sup.engine_url == "http://127.0.0.1:8102"
    assert (sup._host, sup._port) == (None, "8102")
