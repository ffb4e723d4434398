"""The random Llama the real-engine runs serve (tools/tiny_model.py under vLLM's Python): the
tiny default, and a larger one of a given size in a folder of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.vllm.vllm_helpers import TIMEOUT
from tools import vllm_env

pytestmark = [pytest.mark.vllm, TIMEOUT]


def _config(path: Path) -> dict[str, Any]:
    return json.loads((path / "config.json").read_text())


def test_a_sized_model_is_written_apart_from_the_tiny_one() -> None:
    vllm_env.require()
    tiny = vllm_env.ensure_model()
    sized = vllm_env.ensure_model(size=(192, 3))
    assert sized != tiny and sized == vllm_env.model_dir(size=(192, 3))
    assert "-h192-l3-" in sized.name and "-h" not in tiny.name.removeprefix("tiny-llama")
    small, large = _config(tiny), _config(sized)
    assert (small["hidden_size"], small["num_hidden_layers"]) == (128, 2)
    assert (small["num_attention_heads"], small["intermediate_size"]) == (2, 256)
    assert (large["hidden_size"], large["num_hidden_layers"]) == (192, 3)
    assert (large["num_attention_heads"], large["intermediate_size"]) == (3, 384)
    assert large["head_dim"] == 64 and (sized / "tokenizer.json").is_file()
    assert vllm_env.ensure_model(size=(192, 3)) == sized  # made once, then found
    assert vllm_env.ensure_model(size=(128, 2)) == tiny  # the tiny size is the tiny model
