"""
Builds tiny Hugging Face `transformers` models exported to ONNX the way a user does it.

Regenerate them from the repository root (needs the `hf` extra: CPU torch, transformers,
onnxscript, onnxruntime; the test suite does not):

    .venv/bin/pip install -e '.[hf]' && .venv/bin/python examples/hf/build_examples.py

Every model is built from a configuration written below (nothing is downloaded), with
`from_config` and random weights from fixed seeds, put in eval mode and exported with
`torch.onnx.export(..., dynamo=True, opset_version=18)` at static shapes (batch 1,
sequence 8, `use_cache=False`). The graph is kept as the exporter wrote it (its own optimiser
runs, no onnxsim). Next to this file it writes, for each model `<name>`:

- `<name>.onnx`: the export with its weights inline;
- `<name>.npz`: the inputs under the ONNX input names and torch's float32 outputs under
  the ONNX output names.

The models:

- `llama`: `LlamaForCausalLM`, hidden 64, 4 heads / 2 KV heads (GQA), SwiGLU 128,
  2 layers, vocab 128; input `input_ids`, output `logits`;
- `gpt2`: `GPT2LMHeadModel`, hidden 64, 4 heads, 2 layers, vocab 128, tied embeddings;
  input `input_ids`, output `logits`;
- `bert`: `BertModel` with its pooler, hidden 64, 4 heads, 2 layers, vocab 128; inputs
  `input_ids` and `attention_mask` (the last two positions padded), outputs
  `last_hidden_state` and `pooler_output`.

`llama_external.onnx` + `llama_external.onnx.data` is the same LLaMA export saved the
exporter's default way, with the weights in an external data file, and
`llama_external.npz` its inputs and outputs.

The decoders with a KV cache, exported as Optimum and onnxruntime-genai users ship them:
`LlamaForCausalLM`, `Qwen2ForCausalLM` (biases on Q, K and V) and `MistralForCausalLM`,
each hidden 64, 4 heads / 2 KV heads of 16, SwiGLU 128, 2 layers, vocab 128, the position
an input (so RoPE's `cos`/`sin` and the masks are computed at run time). For each family
`<f>` (`llama`, `qwen2`, `mistral`):

- `<f>_prefill`: inputs `input_ids`, `position_ids` and `attention_mask` `[1, 8]` (the
  prompt); outputs `logits [1, 8, 128]` and per layer `N` `present.N.key` and
  `present.N.value` `[1, 2, 8, 16]`;
- `<f>_decode`: one decode step with a cache of `CONTEXT` = 72 positions. Inputs
  `input_ids [1, 1]`, `position_ids [1, 1]`, `attention_mask [1, 72]` and per layer
  `past_key_values.N.key` / `.value` `[1, 2, 71, 16]`; a wrapper builds a `DynamicCache`
  from the pasts. Outputs `logits [1, 1, 128]` and every layer's `present.N.key` /
  `.value` `[1, 2, 72, 16]`, the past with the step's row appended. The stored inputs are
  the step after the prompt: the prompt's cache right-aligned (`present[:, :, 1:]` is the
  next step's past, the oldest row dropping out), zeros masked out on its left;
- `<f>_greedy.npz`: `input_ids` (the prompt, `[1, 8]`) and `tokens` (`[64]`), torch's
  greedy continuation (`generate`, `do_sample=False`). The script checks that the two
  exports give the same tokens when run with onnxruntime, the prefill once and then the
  decode step 63 times with its cache shifted by one row each step.

Each export is checked with `onnx.checker` and run with ONNX's `ReferenceEvaluator` and
onnxruntime against torch; the script prints the largest absolute differences and, per
model, the opset, the inputs and outputs and a count of the ONNX op types. Pass
`--summary PATH` to also write that report to a file.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import torch
from onnx.reference import ReferenceEvaluator
from transformers import (
    BertConfig,
    BertModel,
    DynamicCache,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
)

HERE = Path(__file__).resolve().parent
SEED = 20240601
SEQ = 8
VOCAB = 128
OPSET = 18
# Longest sequence of the models. BERT exports a GatherElements along its token-type
# buffer of this length, and ONNX's ReferenceEvaluator (np.choose) fails past 63.
POSITIONS = 32
MAX_BYTES = 2 * 1024 * 1024
CONTEXT = 72
"""Positions of a decode step's cache: the prompt and 64 generated tokens."""
GENERATED = 64
LAYERS = 2
KV_HEADS = 2
HEAD_DIM = 16


@dataclass(frozen=True)
class Example:
    """One model to export: how to build it, its inputs and the names of its outputs."""

    name: str
    build: Callable[[], PreTrainedModel]
    inputs: Callable[[np.random.Generator], dict[str, np.ndarray[Any, Any]]]
    outputs: tuple[str, ...]


def llama() -> PreTrainedModel:
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=POSITIONS,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        use_cache=False,
    )
    return LlamaForCausalLM(config)


def gpt2() -> PreTrainedModel:
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=POSITIONS,
        n_embd=64,
        n_layer=2,
        n_head=4,
        use_cache=False,
    )
    return GPT2LMHeadModel(config)


def bert() -> PreTrainedModel:
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=POSITIONS,
        type_vocab_size=2,
        use_cache=False,
    )
    return BertModel(config)


def token_ids(rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
    return {"input_ids": rng.integers(0, VOCAB, (1, SEQ), dtype=np.int64)}


def padded_tokens(rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
    mask = np.ones((1, SEQ), dtype=np.int64)
    mask[:, SEQ - 2 :] = 0
    return token_ids(rng) | {"attention_mask": mask}


EXAMPLES = (
    Example("llama", llama, token_ids, ("logits",)),
    Example("gpt2", gpt2, token_ids, ("logits",)),
    Example("bert", bert, padded_tokens, ("last_hidden_state", "pooler_output")),
)


def randomize(model: PreTrainedModel, seed: int) -> None:
    """
    Gives every parameter a seeded random value of a trained model's kind.

    `from_config` initialises normalisation weights to one and biases to zero, which the
    exporter folds into one shared initializer; trained models have neither.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if name.endswith("bias"):
                param.copy_(0.1 * noise)
            elif param.dim() == 1:
                param.copy_(1.0 + 0.1 * noise)
            else:
                param.copy_(noise / param.shape[-1] ** 0.5)


def torch_outputs(
    model: PreTrainedModel, inputs: dict[str, np.ndarray[Any, Any]]
) -> list[np.ndarray[Any, Any]]:
    with torch.no_grad():
        result = model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
    return [o.detach().numpy().astype(np.float32) for o in result.to_tuple()]


def max_abs_diff(got: list[Any], want: list[np.ndarray[Any, Any]]) -> float:
    assert len(got) == len(want)
    return max(float(np.max(np.abs(np.asarray(g) - w))) for g, w in zip(got, want))


def summarize(name: str, model: onnx.ModelProto, path: Path) -> list[str]:
    def shape(value: onnx.ValueInfoProto) -> str:
        tensor = value.type.tensor_type
        dims = "x".join(str(d.dim_value or d.dim_param) for d in tensor.shape.dim)
        return f"{value.name}: {onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)}[{dims}]"

    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    ops = collections.Counter(n.op_type for n in model.graph.node)
    lines = [
        f"== {name} ({path.name}, {path.stat().st_size:,} bytes)",
        f"opset: {opsets}; ir_version {model.ir_version}; producer "
        f"{model.producer_name} {model.producer_version}",
        "inputs: " + "; ".join(shape(v) for v in model.graph.input),
        "outputs: " + "; ".join(shape(v) for v in model.graph.output),
        f"initializers: {len(model.graph.initializer)}; nodes: {len(model.graph.node)}",
        "ops: " + ", ".join(f"{op} {n}" for op, n in sorted(ops.items())),
    ]
    return lines


def check(path: Path, feeds: dict[str, np.ndarray[Any, Any]], want: list[Any]) -> str:
    """Checks the file and runs it with ONNX's evaluator and onnxruntime against torch."""
    onnx.checker.check_model(str(path), full_check=True)
    reference = ReferenceEvaluator(str(path)).run(None, feeds)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ort = session.run(None, feeds)
    ref_err, ort_err = max_abs_diff(reference, want), max_abs_diff(ort, want)
    scale = max(float(np.max(np.abs(w))) for w in want)
    if max(ref_err, ort_err) > 1e-4 * scale:
        raise SystemExit(
            f"{path.name}: the export differs from torch ({ref_err}, {ort_err})"
        )
    return (
        f"max |output| {scale:.4g}; max abs diff vs torch: ReferenceEvaluator "
        f"{ref_err:.3g}, onnxruntime {ort_err:.3g}"
    )


def export(example: Example, index: int, out_dir: Path) -> list[str]:
    torch.manual_seed(SEED + index)
    model = example.build()
    randomize(model, SEED + index)
    model.eval()
    inputs = example.inputs(np.random.default_rng(SEED + index))
    want = torch_outputs(model, inputs)
    assert len(want) == len(example.outputs), (example.name, len(want))
    program = torch.onnx.export(
        model,
        (),
        kwargs={k: torch.from_numpy(v) for k, v in inputs.items()},
        dynamo=True,
        opset_version=OPSET,
        input_names=list(inputs),
        output_names=list(example.outputs),
    )
    assert program is not None
    lines: list[str] = []
    variants = [(example.name, False)]
    if example.name == "llama":
        variants.append((f"{example.name}_external", True))
    for name, external in variants:
        path = out_dir / f"{name}.onnx"
        data = out_dir / f"{name}.onnx.data"
        data.unlink(missing_ok=True)
        program.save(str(path), external_data=external)
        assert data.exists() == external, (name, data)
        size = path.stat().st_size + (data.stat().st_size if external else 0)
        if size > MAX_BYTES:
            raise SystemExit(f"{path.name}: {size} bytes, more than {MAX_BYTES}")
        proto = onnx.load(str(path), load_external_data=False)
        names = [v.name for v in proto.graph.input], [v.name for v in proto.graph.output]
        assert names == (list(inputs), list(example.outputs)), names
        np.savez(
            out_dir / f"{name}.npz",
            **inputs,
            **dict(zip(example.outputs, want, strict=True)),
        )
        lines += summarize(name, proto, path)
        lines.append(check(path, inputs, want))
    return lines


# ---------------------------------------------------------------------------------------
# Decoders with a KV cache: a prefill and a decode step
# ---------------------------------------------------------------------------------------

Array = np.ndarray[Any, Any]


def decoder(family: str) -> PreTrainedModel:
    """A tiny causal LM of `family` (plmr's `tiny` shape), with a KV cache."""
    common: dict[str, Any] = {
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": 4,
        "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": 128,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "use_cache": True,
    }
    if family == "llama":
        return LlamaForCausalLM(LlamaConfig(**common))
    if family == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common))
    assert family == "mistral", family
    return MistralForCausalLM(MistralConfig(**common))


def cache_names(kind: str) -> list[str]:
    """`past_key_values.N.key/value` or `present.N.key/value`, layer by layer."""
    return [f"{kind}.{n}.{kv}" for n in range(LAYERS) for kv in ("key", "value")]


class Step(torch.nn.Module):
    """
    A forward pass with a cache: `(input_ids, position_ids, attention_mask, *pasts)` to
    `(logits, *presents)`; without pasts it is the prefill.
    """

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *pasts: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        cache = DynamicCache(config=self.model.config)
        for n in range(len(pasts) // 2):
            cache.update(pasts[2 * n], pasts[2 * n + 1], n)
        out = self.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=attention_mask,
            past_key_values=cache,
            use_cache=True,
        )
        presents: list[torch.Tensor] = []
        for layer in out.past_key_values.layers:
            presents += [layer.keys, layer.values]
        return (out.logits, *presents)


def step_args(feeds: dict[str, Array]) -> tuple[torch.Tensor, ...]:
    """The arguments of `Step` from feeds by name."""
    names = ["input_ids", "position_ids", "attention_mask"]
    pasts = [k for k in feeds if k not in names]
    return tuple(torch.from_numpy(feeds[k]) for k in (*names, *pasts))


def run_step(step: Step, feeds: dict[str, Array]) -> list[Array]:
    with torch.no_grad():
        outs = step(*step_args(feeds))
    return [o.detach().numpy().astype(np.float32) for o in outs]


def prefill_feeds(prompt: Array) -> dict[str, Array]:
    seq = prompt.shape[1]
    return {
        "input_ids": prompt,
        "position_ids": np.arange(seq, dtype=np.int64)[None],
        "attention_mask": np.ones((1, seq), dtype=np.int64),
    }


def decode_feeds(token: int, position: int, cache: list[Array]) -> dict[str, Array]:
    """
    The inputs of a decode step at `position`: the cache right-aligned in `CONTEXT - 1`
    rows (zeros on the left, masked out), then the step's own row.
    """
    past: list[Array] = []
    for c in cache:
        rows = c.shape[2]
        pad = np.zeros((1, KV_HEADS, CONTEXT - 1 - rows, HEAD_DIM), np.float32)
        past.append(np.concatenate([pad, c], axis=2))
    mask = np.zeros((1, CONTEXT), dtype=np.int64)
    mask[:, CONTEXT - 1 - cache[0].shape[2] :] = 1
    return {
        "input_ids": np.array([[token]], dtype=np.int64),
        "position_ids": np.array([[position]], dtype=np.int64),
        "attention_mask": mask,
        **dict(zip(cache_names("past_key_values"), past, strict=True)),
    }


def export_step(step: Step, feeds: dict[str, Array], path: Path) -> onnx.ModelProto:
    """Exports `step` with the feeds' names in this order, the pasts last."""
    names = ["input_ids", "position_ids", "attention_mask"]
    program = torch.onnx.export(
        step,
        step_args(feeds),
        dynamo=True,
        opset_version=OPSET,
        input_names=[*names, *(k for k in feeds if k not in names)],
        output_names=["logits", *cache_names("present")],
    )
    assert program is not None
    program.save(str(path), external_data=False)
    if path.stat().st_size > MAX_BYTES:
        raise SystemExit(f"{path.name}: {path.stat().st_size} bytes, more than {MAX_BYTES}")
    return onnx.load(str(path))


def ordered(model: onnx.ModelProto, feeds: dict[str, Array]) -> dict[str, Array]:
    """The feeds in the order of the model's inputs."""
    return {v.name: feeds[v.name] for v in model.graph.input}


def greedy_with_onnxruntime(
    prefill: Path, decode: Path, prompt: Array, steps: int
) -> list[int]:
    """The exports' greedy tokens: the prefill, then `steps - 1` decode steps."""
    options = {"providers": ["CPUExecutionProvider"]}
    first = onnxruntime.InferenceSession(str(prefill), **options)
    step = onnxruntime.InferenceSession(str(decode), **options)
    outs = first.run(None, prefill_feeds(prompt))
    tokens = [int(np.argmax(outs[0][0, -1]))]
    cache = [np.asarray(c) for c in outs[1:]]
    position = prompt.shape[1]
    while len(tokens) < steps:
        feeds = decode_feeds(tokens[-1], position, cache)
        outs = step.run(None, feeds)
        tokens.append(int(np.argmax(outs[0][0, -1])))
        cache = [np.asarray(c)[:, :, CONTEXT - (position + 1) :] for c in outs[1:]]
        position += 1
    return tokens


def export_decoder(family: str, index: int, out_dir: Path) -> list[str]:
    """Exports the prefill and the decode step of `family`; checks their tokens."""
    torch.manual_seed(SEED + index)
    model = decoder(family)
    randomize(model, SEED + index)
    model.eval()
    step = Step(model)
    rng = np.random.default_rng(SEED + index)
    prompt = rng.integers(0, VOCAB, (1, SEQ), dtype=np.int64)
    with torch.no_grad():
        generated = model.generate(
            torch.from_numpy(prompt),
            attention_mask=torch.ones(1, SEQ, dtype=torch.int64),
            max_new_tokens=GENERATED,
            min_new_tokens=GENERATED,
            do_sample=False,
        )
    tokens = generated[0, SEQ:].numpy().astype(np.int64)
    assert tokens.shape == (GENERATED,), tokens.shape
    np.savez(out_dir / f"{family}_greedy.npz", input_ids=prompt, tokens=tokens)

    lines: list[str] = []
    prefill = prefill_feeds(prompt)
    want = run_step(step, prefill)
    cache = want[1:]
    decode = decode_feeds(int(tokens[0]), SEQ, cache)
    paths: list[Path] = []
    for kind, feeds in (("prefill", prefill), ("decode", decode)):
        name = f"{family}_{kind}"
        path = out_dir / f"{name}.onnx"
        outputs = run_step(step, feeds)
        model_proto = export_step(step, feeds, path)
        feeds = ordered(model_proto, feeds)
        outs = ["logits", *cache_names("present")]
        assert [v.name for v in model_proto.graph.output] == outs
        np.savez(out_dir / f"{name}.npz", **feeds, **dict(zip(outs, outputs, strict=True)))
        lines += summarize(name, model_proto, path)
        lines.append(check(path, feeds, outputs))
        paths.append(path)
    got = greedy_with_onnxruntime(paths[0], paths[1], prompt, GENERATED)
    if got != tokens.tolist():
        raise SystemExit(
            f"{family}: onnxruntime's tokens {got} differ from torch's {tokens}"
        )
    lines.append(f"{family}: onnxruntime's {GENERATED} greedy tokens equal torch's")
    return lines


DECODERS = ("llama", "qwen2", "mistral")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--summary", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    report = [
        f"torch {torch.__version__}, onnx {onnx.__version__}, "
        f"onnxruntime {onnxruntime.__version__}"
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for index, example in enumerate(EXAMPLES):
            lines = export(example, index, Path(tmp))
            report += lines
            print("\n".join(lines), flush=True)
        for index, family in enumerate(DECODERS, start=len(EXAMPLES)):
            lines = export_decoder(family, index, Path(tmp))
            report += lines
            print("\n".join(lines), flush=True)
        for path in sorted(Path(tmp).iterdir()):
            shutil.copy(path, HERE / path.name)
    if args.summary is not None:
        args.summary.write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
