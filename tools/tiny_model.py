"""Write a tiny random Llama and its tokenizer to a folder, deterministically from a seed.

Runs under the real-engine venv's Python (tools/vllm_env.py), which has torch, transformers and
tokenizers; the product's own venv has none of them:

    <venv>/bin/python tools/tiny_model.py OUT_DIR --seed 0

The weights are noise (vLLM's text from it is noise too); what counts is that vLLM loads it in
seconds on a CPU and that its timing and protocol are real. Sizes: 2 layers, hidden 128, 2
heads of 64 (the CPU attention backend refuses head size 16), a byte-level BPE vocabulary
trained on the lines below, and a chat template so /v1/chat/completions works. `--hidden H
--layers L` make a larger one (heads of 64, an MLP of 2H): a step in which the model's own
arithmetic, not the engine's Python, takes most of the time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}</s>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Tiergate puts a priority gateway in front of an inference engine.",
    "Online requests are served before batch and offline requests.",
    "A tiny random model answers with noise, but its timing is real.",
    "word word word word hello world, numbers 0 1 2 3 4 5 6 7 8 9.",
    "Summarise the following document in three sentences, please.",
]
VOCAB_SIZE = 512
MAX_POSITIONS = 4096


def train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


HIDDEN, LAYERS, HEAD_DIM = 128, 2, 64


def size_problem(hidden: int, layers: int) -> str | None:
    """What is wrong with a model size (None: nothing)."""
    if hidden < HEAD_DIM or hidden % HEAD_DIM or layers < 1:
        return (
            f"hidden must be a multiple of {HEAD_DIM} and layers at least 1, "
            f"not {hidden} and {layers}"
        )
    return None


def write_model(
    out: Path, seed: int, vocab_size: int, hidden: int = HIDDEN, layers: int = LAYERS
) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // HEAD_DIM,
        num_key_value_heads=hidden // HEAD_DIM,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=1,
        eos_token_id=2,
        torch_dtype="bfloat16",
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=HIDDEN, help="a multiple of 64")
    parser.add_argument("--layers", type=int, default=LAYERS)
    args = parser.parse_args()
    problem = size_problem(args.hidden, args.layers)
    if problem:
        parser.error(problem)
    args.out.mkdir(parents=True, exist_ok=True)
    train_tokenizer(args.out)
    vocab = len(json.loads((args.out / "tokenizer.json").read_text())["model"]["vocab"])
    write_model(args.out, args.seed, vocab, args.hidden, args.layers)


if __name__ == "__main__":
    main()
