"""
The real models the installed `onnx` package ships as backend test data
(`onnx/backend/test/data/{light,pytorch-converted,pytorch-operator,simple}`), imported
with `plmr.frontend.onnx` and run with plmr's reference semantics against every
stored output.

Which models are kept, and which filter drops the others:
- `no test data`: no stored outputs to compare with;
- `non-tensor type`: a graph input or output is a sequence, map or optional (no model
  of the pinned onnx release has one);
- `string tensor`: a graph input or output holds strings (`test_strnorm_*`);
- `sequence op`: the graph builds or reads sequences (`test_sequence_model*`, whose
  graph inputs and outputs are tensors but whose values in between are not);
- `training op`: the graph uses an op of the training domain (`Gradient`);
- `dynamic shape`: a graph input has a symbolic or unknown dimension, or is the shape
  operand of an op (`Expand`, `Reshape`, ...), so the output shape depends on the
  input's values (`test_expand_shape_model*`).

Every kept model either imports and matches, or is refused with one PlmrError that
names the node and its op; nothing crashes. Run this file as a script for the table.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from plmr.errors import PlmrError
from plmr.frontend.onnx import import_onnx
from plmr.runtime.reference import evaluate_function

Array = npt.NDArray[Any]

DATA = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data"
FOLDERS = ("light", "pytorch-converted", "pytorch-operator", "simple")

TOLERANCE = 1e-4
"""Largest error allowed, relative to the largest magnitude of the expected output."""

LIGHT_MODELS = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)

TRAINING_DOMAINS = ("ai.onnx.preview.training",)

SHAPE_OPERANDS = {"Expand": 1, "Reshape": 1, "ConstantOfShape": 0, "Tile": 1, "Range": 0}
"""The input of each op that sets its output's shape."""


@dataclass
class Case:
    """One backend model with its data sets (inputs, expected outputs)."""

    name: str
    model: onnx.ModelProto
    data_sets: list[tuple[list[Array], list[Array]]] = field(
        default_factory=lambda: list[tuple[list[Array], list[Array]]]()
    )


@dataclass
class Outcome:
    """What happened to one kept model."""

    name: str
    status: str
    """`exact`, `mismatch`, `refused` or `crashed`."""
    detail: str = ""
    seconds: float = 0.0


def _read(path: Path) -> Array:
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return np.asarray(numpy_helper.to_array(tensor))


def _light_inputs(model: onnx.ModelProto) -> list[Array]:
    """The inputs onnx's backend runner feeds a light model: `arange(n) / n`."""
    inits = {i.name for i in model.graph.initializer}
    feeds: list[Array] = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(d.dim_value or 1 for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds.append((np.arange(n).reshape(shape) / n).astype(np.float32))
    return feeds


def collect() -> list[Case]:
    """Every model of the four folders with its stored data sets."""
    cases: list[Case] = []
    for path in sorted((DATA / "light").glob("light_*.onnx")):
        model = onnx.load(str(path))
        outputs = sorted(path.parent.glob(f"{path.stem}_output_*.pb"))
        case = Case(f"light/{path.stem}", model)
        if outputs:
            case.data_sets.append((_light_inputs(model), [_read(p) for p in outputs]))
        cases.append(case)
    for folder in FOLDERS[1:]:
        for model_path in sorted((DATA / folder).glob("*/model.onnx")):
            case = Case(f"{folder}/{model_path.parent.name}", onnx.load(str(model_path)))
            for ds in sorted(model_path.parent.glob("test_data_set_*")):
                inputs = [_read(p) for p in sorted(ds.glob("input_*.pb"))]
                outputs = [_read(p) for p in sorted(ds.glob("output_*.pb"))]
                case.data_sets.append((inputs, outputs))
            cases.append(case)
    return cases


def drop_reason(case: Case) -> str | None:
    """Why `case` is left out of the comparison (None if it is kept)."""
    if not case.data_sets or not all(outs for _, outs in case.data_sets):
        return "no test data"
    values = [*case.model.graph.input, *case.model.graph.output]
    if any(vi.type.WhichOneof("value") != "tensor_type" for vi in values):
        return "non-tensor type"
    if any(vi.type.tensor_type.elem_type == onnx.TensorProto.STRING for vi in values):
        return "string tensor"
    nodes = case.model.graph.node
    if any("Sequence" in n.op_type for n in nodes):
        return "sequence op"
    if any(n.domain in TRAINING_DOMAINS for n in nodes):
        return "training op"
    inits = {i.name for i in case.model.graph.initializer}
    inputs = [vi for vi in case.model.graph.input if vi.name not in inits]
    for vi in inputs:
        if any(d.WhichOneof("value") != "dim_value" for d in vi.type.tensor_type.shape.dim):
            return "dynamic shape"
    names = {vi.name for vi in inputs}
    for n in nodes:
        operand = SHAPE_OPERANDS.get(n.op_type)
        if operand is not None and len(n.input) > operand and n.input[operand] in names:
            return "dynamic shape"
    return None


def _max_error(got: Array, want: Array) -> float:
    """The largest error relative to the largest magnitude of `want`."""
    if got.shape != want.shape:
        return float("inf")
    if want.dtype.kind in "biu":
        return 0.0 if np.array_equal(got, want) else float("inf")
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return float("inf")
    finite = ~np.isnan(w)
    scale = max(float(np.max(np.abs(w[finite]), initial=0.0)), 1e-6)
    return float(np.max(np.abs(g[finite] - w[finite]), initial=0.0)) / scale


def run_case(case: Case) -> Outcome:
    """Imports `case` and compares plmr's reference run with every stored output."""
    start = time.perf_counter()
    try:
        module = import_onnx(case.model)
    except PlmrError as e:
        return Outcome(case.name, "refused", str(e), time.perf_counter() - start)
    except Exception as e:  # a crash is what this test looks for
        return Outcome(case.name, "crashed", repr(e), time.perf_counter() - start)
    worst = 0.0
    for inputs, outputs in case.data_sets:
        try:
            got = evaluate_function(module, "main", inputs)
        except Exception as e:
            return Outcome(case.name, "crashed", f"run: {e!r}", time.perf_counter() - start)
        if len(got) != len(outputs):
            return Outcome(
                case.name, "mismatch", f"{len(got)} outputs, want {len(outputs)}"
            )
        for g, w in zip(got, outputs, strict=True):
            worst = max(worst, _max_error(np.asarray(g), w))
    status = "exact" if worst <= TOLERANCE else "mismatch"
    return Outcome(case.name, status, f"max error {worst:.2e}", time.perf_counter() - start)


def refusal_op(detail: str) -> str:
    """The op a refusal names, e.g. `Conv` from `node 'c' (Conv): ...`."""
    head = detail.split(":", 1)[0]
    if "(" in head and head.endswith(")"):
        return head[head.rindex("(") + 1 : -1]
    return head


@pytest.fixture(scope="module")
def outcomes() -> tuple[dict[str, str], list[Outcome]]:
    dropped: dict[str, str] = {}
    results: list[Outcome] = []
    for case in collect():
        reason = drop_reason(case)
        if reason is not None:
            dropped[case.name] = reason
            continue
        results.append(run_case(case))
    return dropped, results


def summary(dropped: dict[str, str], results: list[Outcome]) -> str:
    counts = Counter(o.status for o in results)
    lines = [
        f"backend models: {len(dropped) + len(results)}, kept {len(results)}, "
        f"exact {counts['exact']}, mismatch {counts['mismatch']}, "
        f"refused {counts['refused']}, crashed {counts['crashed']}",
        "dropped: "
        + ", ".join(f"{r} {n}" for r, n in sorted(Counter(dropped.values()).items())),
        "refused by op: "
        + ", ".join(
            f"{op} {n}"
            for op, n in Counter(
                refusal_op(o.detail) for o in results if o.status == "refused"
            ).most_common()
        ),
        f"{'model':<60} {'status':<9} {'seconds':>7}  detail",
    ]
    for o in results:
        lines.append(f"{o.name:<60} {o.status:<9} {o.seconds:7.2f}  {o.detail[:120]}")
    return "\n".join(lines)


def test_backend_models(outcomes: tuple[dict[str, str], list[Outcome]]):
    dropped, results = outcomes
    print(summary(dropped, results))
    counts = Counter(o.status for o in results)
    assert counts["crashed"] == 0, [o for o in results if o.status == "crashed"]
    assert counts["mismatch"] == 0, [o for o in results if o.status == "mismatch"]
    for o in results:
        if o.status == "refused":
            assert o.detail.startswith("node "), o.detail
    kept = len(results)
    assert kept == 129
    assert counts["exact"] >= 0.9 * kept
    # The counts reached: every kept model but one (Pow with a run-time exponent).
    assert counts["exact"] >= 128


def test_light_models_import_and_run(outcomes: tuple[dict[str, str], list[Outcome]]):
    _, results = outcomes
    light = {o.name: o for o in results if o.name.startswith("light/")}
    assert sorted(light) == [f"light/light_{m}" for m in LIGHT_MODELS]
    assert all(o.status == "exact" for o in light.values()), light


def _with_random_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """
    `model` at opset 15 with each `ConstantOfShape` weight replaced by an initializer of
    its value times uniform noise in [0.5, 1.5] (the light models' weights are constant,
    so their stored outputs are uniform and check little).
    """
    rng = np.random.default_rng(seed)
    model = onnx.version_converter.convert_version(model, 15)
    shapes = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    kept: list[onnx.NodeProto] = []
    weights: dict[str, onnx.TensorProto] = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        value = numpy_helper.to_array(node.attribute[0].t).reshape(())
        shape = tuple(int(d) for d in shapes[node.input[0]])
        noisy = (value * rng.uniform(0.5, 1.5, shape)).astype(np.float32)
        weights[node.output[0]] = numpy_helper.from_array(noisy, node.output[0])
    del model.graph.node[:]
    model.graph.node.extend(kept)
    del model.graph.initializer[:]
    model.graph.initializer.extend(weights.values())
    return model


def test_light_shufflenet_with_random_weights():
    # At opset 15 BatchNormalization says it runs in inference mode; ONNX's reference
    # evaluator runs the opset-9 one with batch statistics, so compare at opset 15.
    model = _with_random_weights(
        onnx.load(str(DATA / "light" / "light_shufflenet.onnx")), 0
    )
    (x,) = _light_inputs(model)
    x = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    (got,) = evaluate_function(import_onnx(model), "main", [x])
    name = next(
        i.name
        for i in model.graph.input
        if i.name not in {w.name for w in model.graph.initializer}
    )
    (want,) = ReferenceEvaluator(model).run(None, {name: x})
    assert np.unique(want).size > 900  # the logits differ
    assert _max_error(got, np.asarray(want)) < TOLERANCE


def test_filters_drop_what_they_say():
    dropped = {c.name: r for c in collect() if (r := drop_reason(c)) is not None}
    assert Counter(dropped.values()) == {
        "dynamic shape": 4,
        "sequence op": 8,
        "string tensor": 6,
        "training op": 2,
    }
    assert dropped["simple/test_strnorm_model_monday_empty_output"] == "string tensor"
    assert dropped["simple/test_gradient_of_add"] == "training op"
    assert dropped["simple/test_sequence_model2"] == "sequence op"
    assert dropped["simple/test_expand_shape_model1"] == "dynamic shape"


if __name__ == "__main__":
    kept_results: list[Outcome] = []
    dropped_cases: dict[str, str] = {}
    for c in collect():
        r = drop_reason(c)
        if r is None:
            kept_results.append(run_case(c))
        else:
            dropped_cases[c.name] = r
    print(summary(dropped_cases, kept_results))
