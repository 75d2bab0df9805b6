"""
Builds the example ONNX models of plmr and their imported `graph` IR.

Run it from the repository root:

    .venv/bin/python examples/onnx/build_models.py

It writes, next to this file, `<name>.onnx` (built with `onnx.helper`, random weights
from a seeded generator, so the output is reproducible) and `<name>.mlir` (the model
imported with `plmr.frontend.onnx`) for each of:

- `mlp`: Gemm / MatMul + Add / Relu layers;
- `attention`: two-head causal self-attention;
- `conv_block`: Conv + Relu + MaxPool + AveragePool + Flatten + Gemm;
- `transformer_block`: a pre-LayerNorm transformer block (attention, residuals, a gated
  FFN with an erf-GELU written out and one Gelu op); opset 20, for Gelu;
- `rnn_cell`: a GRU cell with inputs `x` and `h`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from plmr.frontend.onnx import import_onnx

Array = npt.NDArray[Any]

HERE = Path(__file__).resolve().parent
SEED = 20240601


class GraphBuilder:
    """Collects nodes and initializers; names nodes `<prefix>/<op><n>`."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def weight(self, name: str, shape: tuple[int, ...], scale: float | None = None) -> str:
        """A random float32 initializer (Glorot-like scale by default)."""
        if scale is None:
            scale = 1.0 / math.sqrt(shape[0])
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.init(name, value)

    def init(self, name: str, value: Array) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        """Adds a one-output node and returns its output name."""
        self.count += 1
        name = f"{op}_{self.count}"
        output = out or f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, **attrs))
        return output

    def scalar(self, value: float) -> str:
        """A scalar float32 Constant node."""
        return self.node("Constant", [], value=numpy_helper.from_array(np.float32(value)))

    def ints(self, values: list[int]) -> str:
        """A 1-D int64 Constant node (shapes, axes)."""
        return self.node("Constant", [], value_ints=values)

    def linear(
        self, x: str, d_in: int, d_out: int, prefix: str, out: str | None = None
    ) -> str:
        """`x · W + b` as MatMul + Add."""
        w = self.weight(f"{prefix}.weight", (d_in, d_out))
        b = self.weight(f"{prefix}.bias", (d_out,), scale=0.1)
        return self.node("Add", [self.node("MatMul", [x, w]), b], out)

    def model(
        self,
        name: str,
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
        opset: int,
    ) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(
            g, opset_imports=[helper.make_opsetid("", opset)], producer_name="plmr"
        )
        onnx.checker.check_model(model, full_check=True)
        return model


def tensor(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------


def build_mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """x[4, 16] -> Gemm -> Relu -> MatMul + Add -> Relu -> Gemm(transB) -> logits[4, 10]."""
    b = GraphBuilder(rng)
    w1 = b.weight("fc1.weight", (16, 32))
    b1 = b.weight("fc1.bias", (32,), scale=0.1)
    h1 = b.node("Relu", [b.node("Gemm", ["x", w1, b1])], "hidden1")
    h2 = b.node("Relu", [b.linear(h1, 32, 32, "fc2")], "hidden2")
    w3 = b.weight("fc3.weight", (10, 32), scale=1 / math.sqrt(32))
    b3 = b.weight("fc3.bias", (10,), scale=0.1)
    b.node("Gemm", [h2, w3, b3], "logits", transB=1)
    return b.model("mlp", [tensor("x", [4, 16])], [tensor("logits", [4, 10])], 17)


def attention(
    b: GraphBuilder, x: str, seq: int, d_model: int, heads: int, prefix: str, out: str
) -> str:
    """Causal multi-head self-attention on x[1, seq, d_model]; returns the output name."""
    dh = d_model // heads
    q = b.linear(x, d_model, d_model, f"{prefix}.q")
    k = b.linear(x, d_model, d_model, f"{prefix}.k")
    v = b.linear(x, d_model, d_model, f"{prefix}.v")
    split_heads = b.ints([0, 0, heads, dh])  # 0 copies the batch and sequence sizes
    qh = b.node("Transpose", [b.node("Reshape", [q, split_heads])], perm=[0, 2, 1, 3])
    kt = b.node("Transpose", [b.node("Reshape", [k, split_heads])], perm=[0, 2, 3, 1])
    vh = b.node("Transpose", [b.node("Reshape", [v, split_heads])], perm=[0, 2, 1, 3])
    scores = b.node("Div", [b.node("MatMul", [qh, kt]), b.scalar(math.sqrt(dh))])
    mask = np.triu(np.full((seq, seq), -1e9, dtype=np.float32), k=1).reshape(1, 1, seq, seq)
    masked = b.node("Add", [scores, b.init(f"{prefix}.causal_mask", mask)])
    probs = b.node("Softmax", [masked], f"{prefix}.probs", axis=-1)
    ctx = b.node("Transpose", [b.node("MatMul", [probs, vh])], perm=[0, 2, 1, 3])
    merged = b.node("Reshape", [ctx, b.ints([1, seq, -1])])
    return b.linear(merged, d_model, d_model, f"{prefix}.o", out)


def build_attention(rng: np.random.Generator) -> onnx.ModelProto:
    """Two-head causal self-attention: x[1, 8, 16] -> y[1, 8, 16]."""
    b = GraphBuilder(rng)
    attention(b, "x", 8, 16, 2, "attn", "y")
    return b.model("attention", [tensor("x", [1, 8, 16])], [tensor("y", [1, 8, 16])], 17)


def build_conv_block(rng: np.random.Generator) -> onnx.ModelProto:
    """image[1, 3, 16, 16] -> Conv -> Relu -> MaxPool -> AveragePool -> Flatten -> Gemm."""
    b = GraphBuilder(rng)
    w = b.weight("conv.weight", (8, 3, 3, 3), scale=1 / math.sqrt(27))
    bias = b.weight("conv.bias", (8,), scale=0.1)
    conv = b.node("Conv", ["image", w, bias], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    act = b.node("Relu", [conv], "features")
    pooled = b.node("MaxPool", [act], kernel_shape=[2, 2], strides=[2, 2])
    avg = b.node(
        "AveragePool", [pooled], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )
    flat = b.node("Flatten", [avg], axis=1)
    fc_w = b.weight("fc.weight", (10, 128), scale=1 / math.sqrt(128))
    fc_b = b.weight("fc.bias", (10,), scale=0.1)
    b.node("Gemm", [flat, fc_w, fc_b], "logits", transB=1)
    return b.model(
        "conv_block", [tensor("image", [1, 3, 16, 16])], [tensor("logits", [1, 10])], 17
    )


def build_transformer_block(rng: np.random.Generator) -> onnx.ModelProto:
    """Pre-LN transformer block on x[1, 8, 16] with a gated GELU FFN (hidden size 32)."""
    b = GraphBuilder(rng)
    d, hidden = 16, 32
    g1 = b.init("ln1.weight", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
    be1 = b.weight("ln1.bias", (d,), scale=0.1)
    n1 = b.node("LayerNormalization", ["x", g1, be1], "ln1_out", axis=-1, epsilon=1e-5)
    attn = attention(b, n1, 8, d, 2, "attn", "attn_out")
    res1 = b.node("Add", ["x", attn], "residual1")
    g2 = b.init("ln2.weight", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
    n2 = b.node("LayerNormalization", [res1, g2], "ln2_out", axis=-1, epsilon=1e-5)
    # Erf-GELU written out: u * 0.5 * (1 + erf(u / sqrt(2))).
    u = b.linear(n2, d, hidden, "ffn.up")
    erf = b.node("Erf", [b.node("Div", [u, b.scalar(math.sqrt(2.0))])])
    gelu = b.node(
        "Mul", [b.node("Mul", [u, b.scalar(0.5)]), b.node("Add", [erf, b.scalar(1.0)])]
    )
    # Gate: the Gelu op (tanh approximation, opset 20).
    gate = b.node("Gelu", [b.linear(n2, d, hidden, "ffn.gate")], approximate="tanh")
    ffn = b.linear(b.node("Mul", [gelu, gate]), hidden, d, "ffn.down")
    b.node("Add", [res1, ffn], "y")
    return b.model(
        "transformer_block", [tensor("x", [1, 8, d])], [tensor("y", [1, 8, d])], 20
    )


def build_rnn_cell(rng: np.random.Generator) -> onnx.ModelProto:
    """
    A GRU cell on x[2, 8] and h[2, 16]: z = σ(x·Wz + h·Uz + bz),
    r = σ(x·Wr + h·Ur + br), n = tanh(x·Wn + (r ⊙ h)·Un + bn),
    h_next = (1 - z) ⊙ n + z ⊙ h.
    """
    b = GraphBuilder(rng)
    d_in, d_h = 8, 16

    def gate(name: str, h: str, act: str) -> str:
        wx = b.node("MatMul", ["x", b.weight(f"{name}.Wx", (d_in, d_h))])
        wh = b.node("MatMul", [h, b.weight(f"{name}.Wh", (d_h, d_h))])
        pre = b.node("Add", [b.node("Add", [wx, wh]), b.weight(f"{name}.b", (d_h,), 0.1)])
        return b.node(act, [pre], f"{name}_gate")

    z = gate("update", "h", "Sigmoid")
    r = gate("reset", "h", "Sigmoid")
    n = gate("candidate", b.node("Mul", [r, "h"]), "Tanh")
    one_minus_z = b.node("Sub", [b.scalar(1.0), z])
    b.node("Add", [b.node("Mul", [one_minus_z, n]), b.node("Mul", [z, "h"])], "h_next")
    return b.model(
        "rnn_cell",
        [tensor("x", [2, d_in]), tensor("h", [2, d_h])],
        [tensor("h_next", [2, d_h])],
        17,
    )


MODELS: dict[str, Callable[[np.random.Generator], onnx.ModelProto]] = {
    "mlp": build_mlp,
    "attention": build_attention,
    "conv_block": build_conv_block,
    "transformer_block": build_transformer_block,
    "rnn_cell": build_rnn_cell,
}
"""The example models by file name (without extension)."""


def main() -> None:
    for i, (name, build) in enumerate(MODELS.items()):
        model = build(np.random.default_rng(SEED + i))
        path = HERE / f"{name}.onnx"
        onnx.save(model, str(path))
        module = import_onnx(model)
        (HERE / f"{name}.mlir").write_text(str(module) + "\n")
        print(f"wrote {path.name} ({path.stat().st_size} bytes) and {name}.mlir")


if __name__ == "__main__":
    main()
