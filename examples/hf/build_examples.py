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
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
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
        for path in sorted(Path(tmp).iterdir()):
            shutil.copy(path, HERE / path.name)
    if args.summary is not None:
        args.summary.write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
