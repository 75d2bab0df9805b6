"""
Import of ONNX models into the `graph` dialect.

`import_onnx(model)` turns the main graph of an ONNX model into a module holding one
`func.func @main` of `graph` ops:

- graph inputs that are not initializers become the function's arguments, graph outputs
  its results; their ONNX names are kept as `{plmr.name = "<onnx name>"}` argument and
  result attributes, and sanitized ONNX names become the SSA names of the values;
- initializers and `Constant` nodes become `graph.constant` ops, created where they are
  first used as tensors. Inputs that must be known at compile time (a Reshape's shape,
  a Split's sizes, Squeeze / Unsqueeze / Reduce axes, a Pow exponent) are read from them
  directly; data-movement nodes whose inputs are all constant (Reshape, Transpose,
  Concat, Gather, ...) are folded.

Only the default ONNX domain at opsets 13 to 20 with static shapes is accepted. Anything
else (another opset, a dynamic dimension, an unsupported op or attribute value) raises a
`PlmrError` that names the offending input or node and says how to fix the model.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    AnyDenseElement,
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    ModuleOp,
    StringAttr,
    TensorType,
    f32,
    f64,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from plmr.dialects import graph
from plmr.errors import PlmrError

Array = npt.NDArray[Any]
Shape = tuple[int, ...]

MIN_OPSET = 13
"""The oldest default-domain ONNX opset the importer accepts."""

MAX_OPSET = 20
"""The newest default-domain ONNX opset the importer accepts."""

NAME_ATTR = "plmr.name"
"""The argument / result attribute that records a value's ONNX name."""


# ---------------------------------------------------------------------------------------
# Element types
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ElementKind:
    """An ONNX element type plmr supports: its MLIR type and little-endian numpy dtype."""

    mlir: AnyDenseElement
    dtype: np.dtype[Any]
    name: str


_ELEMENT_KINDS: dict[int, _ElementKind] = {
    onnx.TensorProto.FLOAT: _ElementKind(f32, np.dtype("<f4"), "float32"),
    onnx.TensorProto.FLOAT16: _ElementKind(Float16Type(), np.dtype("<f2"), "float16"),
    onnx.TensorProto.DOUBLE: _ElementKind(f64, np.dtype("<f8"), "float64"),
    onnx.TensorProto.INT64: _ElementKind(i64, np.dtype("<i8"), "int64"),
    onnx.TensorProto.INT32: _ElementKind(i32, np.dtype("<i4"), "int32"),
}

_SUPPORTED_TYPES = ", ".join(k.name for k in _ELEMENT_KINDS.values())


def _kind_of_dtype(dtype: np.dtype[Any]) -> _ElementKind | None:
    """The supported element kind holding values of a numpy dtype, if any."""
    for kind in _ELEMENT_KINDS.values():
        if kind.dtype.kind == dtype.kind and kind.dtype.itemsize == dtype.itemsize:
            return kind
    return None


def _onnx_type_name(elem_type: int) -> str:
    """The ONNX spelling of a TensorProto data type, e.g. `FLOAT16`."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"data type {elem_type}"


def _dense(arr: Array, kind: _ElementKind) -> DenseIntOrFPElementsAttr:
    """A dense elements attribute holding `arr` (little-endian raw bytes)."""
    data = np.ascontiguousarray(arr, dtype=kind.dtype).tobytes()
    return DenseIntOrFPElementsAttr(TensorType(kind.mlir, arr.shape), BytesAttr(data))


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_$.-]")


def ssa_name(onnx_name: str) -> str | None:
    """A valid SSA name hint for an ONNX value name (None if nothing readable is left)."""
    name = _INVALID_NAME_CHARS.sub("_", onnx_name).strip("_")
    if not name:
        return None
    if name[0].isdigit():
        name = f"v{name}"
    return name


def _fmt_shape(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _int_list(arr: Array) -> list[int]:
    """The elements of an integer array as Python ints, row-major."""
    return [int(v) for v in np.asarray(arr).reshape(-1).tolist()]


def _shape_of(value: SSAValue) -> Shape:
    return graph.static_shape(value, "value")


def _to_array(tensor: onnx.TensorProto, what: str) -> Array:
    """The value of an ONNX tensor as a numpy array, or a PlmrError naming `what`."""
    try:
        return np.asarray(numpy_helper.to_array(tensor))
    except (ValueError, TypeError, OSError, KeyError, onnx.checker.ValidationError) as e:
        raise PlmrError(
            f"cannot read the value of {what}: {e}; if it is stored as external data, "
            "load the model with onnx.load(path) (which loads external data) or use "
            "import_onnx_file"
        ) from e


@dataclass
class _Node:
    """An ONNX node with its position, and typed access to its inputs and attributes."""

    proto: onnx.NodeProto
    index: int

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def where(self) -> str:
        """`node 'name' (OpType)`, or `node #index (OpType)` for an unnamed node."""
        if self.proto.name:
            return f"node '{self.proto.name}' ({self.op_type})"
        return f"node #{self.index} ({self.op_type})"

    def error(self, message: str) -> PlmrError:
        return PlmrError(f"{self.where}: {message}")

    def input(self, i: int) -> str:
        """The name of input `i`, or '' if it is absent (an omitted optional input)."""
        return self.proto.input[i] if i < len(self.proto.input) else ""

    def output(self, i: int) -> str:
        """The name of output `i`, or '' if it is absent."""
        return self.proto.output[i] if i < len(self.proto.output) else ""

    def attr(self, name: str) -> onnx.AttributeProto | None:
        for a in self.proto.attribute:
            if a.name == name:
                return a
        return None

    def _typed_attr(
        self, name: str, kind: onnx.AttributeProto.AttributeType, what: str
    ) -> onnx.AttributeProto | None:
        a = self.attr(name)
        if a is None:
            return None
        if a.type != kind:
            raise self.error(
                f"attribute '{name}' must be {what}, got an attribute of type "
                f"{onnx.AttributeProto.AttributeType.Name(a.type)}; fix the model "
                "(onnx.checker.check_model reports this too)"
            )
        return a

    def int_attr(self, name: str, default: int) -> int:
        a = self._typed_attr(name, onnx.AttributeProto.INT, "an integer")
        return default if a is None else int(a.i)

    def float_attr(self, name: str, default: float) -> float:
        a = self._typed_attr(name, onnx.AttributeProto.FLOAT, "a float")
        # ONNX stores float attributes as float32: keep the shortest decimal that rounds
        # to the same float32 (1e-05, not 9.9999997473787516e-06) for readable IR.
        return default if a is None else float(str(np.float32(a.f)))

    def str_attr(self, name: str, default: str) -> str:
        a = self._typed_attr(name, onnx.AttributeProto.STRING, "a string")
        return default if a is None else a.s.decode("utf-8", errors="replace")

    def ints_attr(self, name: str) -> list[int] | None:
        a = self._typed_attr(name, onnx.AttributeProto.INTS, "a list of integers")
        return None if a is None else [int(v) for v in a.ints]

    def unsupported_attr(self, name: str, value: object, supported: str) -> PlmrError:
        return self.error(
            f"attribute {name} = {value} is not supported ({supported}); rewrite the "
            "model without it"
        )


Handler = Callable[["_Importer", _Node], None]


# ---------------------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------------------


def _default_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset, or a PlmrError if plmr does not support it."""
    versions = [int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise PlmrError(
            "the model imports no default-domain ONNX opset (opset_import has no entry "
            f"for domain ''); plmr supports opsets {MIN_OPSET} to {MAX_OPSET}: add one, "
            "e.g. onnx.helper.make_opsetid('', 17)"
        )
    version = versions[0]
    if not MIN_OPSET <= version <= MAX_OPSET:
        target = min(max(version, MIN_OPSET), MAX_OPSET)
        raise PlmrError(
            f"the model uses ONNX opset {version}, but plmr supports opsets {MIN_OPSET} "
            f"to {MAX_OPSET}; convert it first with "
            f"onnx.version_converter.convert_version(model, {target})"
        )
    return version


def _input_type(vi: onnx.ValueInfoProto) -> TensorType[Attribute]:
    """The static tensor type of a graph input, or a PlmrError saying how to fix it."""
    name = vi.name
    if vi.type.WhichOneof("value") != "tensor_type":
        raise PlmrError(
            f"graph input '{name}' is not a tensor (its type is "
            f"{vi.type.WhichOneof('value') or 'missing'}); plmr imports tensor inputs only"
        )
    tt = vi.type.tensor_type
    kind = _ELEMENT_KINDS.get(tt.elem_type)
    if kind is None:
        raise PlmrError(
            f"graph input '{name}' has element type {_onnx_type_name(tt.elem_type)}, "
            f"which plmr does not support (supported: {_SUPPORTED_TYPES}); change the "
            "input type, e.g. by exporting the model in float32"
        )
    if not tt.HasField("shape"):
        raise PlmrError(
            f"graph input '{name}' has no shape (unknown rank); plmr needs static shapes: "
            "give the input a fixed shape when exporting the model"
        )
    dims: list[int | str] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value" and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param if which == "dim_param" and d.dim_param else "?")
    for i, d in enumerate(dims):
        if isinstance(d, int):
            continue
        what = f"the symbolic size '{d}'" if d != "?" else "an unknown size"
        fixed = [v if isinstance(v, int) else 1 for v in dims]
        raise PlmrError(
            f"graph input '{name}' has a dynamic dimension: dimension {i} of its shape "
            f"{_fmt_shape(dims)} has {what}; plmr needs static shapes. Fix the shape "
            "before importing, e.g. with onnx.tools.update_model_dims."
            f"update_inputs_outputs_dims(model, {{'{name}': {fixed}, ...}}, "
            "{<output name>: <output shape>, ...}), or export the model with fixed sizes"
        )
    return TensorType(kind.mlir, [d for d in dims if isinstance(d, int)])


class _Importer:
    """Converts the main graph of one ONNX model, node by node, into a block of ops."""

    def __init__(self, model: onnx.ModelProto, func_name: str):
        if not model.HasField("graph"):
            raise PlmrError(
                "the ONNX model has no graph (is it an empty or non-model protobuf?); "
                "pass a model saved with onnx.save"
            )
        self.model = model
        self.graph = model.graph
        self.func_name = func_name
        self.opset = _default_opset(model)
        self.values: dict[str, SSAValue] = {}
        """SSA values of the ONNX names defined so far (arguments, results, constants)."""
        self.consts: dict[str, Array] = {}
        """Compile-time values: initializers, Constant outputs and folded results."""
        self.block = Block()
        self.used: set[str] = {name for n in self.graph.node for name in n.input if name}
        self.used |= {o.name for o in self.graph.output}

    # -- values --------------------------------------------------------------------------

    def emit(self, op: Operation) -> SSAValue:
        """Appends `op` to the function body and returns its (first) result."""
        self.block.add_op(op)
        return op.results[0]

    def define(self, name: str, value: SSAValue) -> None:
        """Binds the ONNX name `name` to `value` (and names the value after it)."""
        if not name:
            return
        if value.name_hint is None:
            value.name_hint = ssa_name(name)
        self.values[name] = value

    def define_const(self, name: str, arr: Array) -> None:
        """Binds the ONNX name `name` to a compile-time value (materialized when used)."""
        if name:
            self.consts[name] = arr

    def value(self, name: str, where: str) -> SSAValue:
        """The SSA value of an ONNX name, materializing a constant on first use."""
        existing = self.values.get(name)
        if existing is not None:
            return existing
        arr = self.consts.get(name)
        if arr is None:
            raise PlmrError(
                f"{where}: '{name}' is not a graph input, an initializer or the output "
                "of an earlier node; sort the graph topologically and check it with "
                "onnx.checker.check_model"
            )
        result = self.materialize(arr, name, where)
        self.define(name, result)
        return result

    def materialize(self, arr: Array, name: str, where: str) -> SSAValue:
        """A new `graph.constant` holding `arr`, named after the ONNX name `name`."""
        kind = _kind_of_dtype(arr.dtype)
        if kind is None:
            raise PlmrError(
                f"{where}: constant '{name}' has element type {arr.dtype}, which plmr "
                f"does not support (supported: {_SUPPORTED_TYPES}); convert it in the "
                "model"
            )
        result = self.emit(graph.ConstantOp(_dense(arr, kind)))
        result.name_hint = ssa_name(name)
        return result

    def tensor(self, node: _Node, i: int) -> SSAValue:
        """The SSA value of input `i` of `node` (which must be present)."""
        name = node.input(i)
        if not name:
            raise node.error(f"input {i} is missing but required; fix the model")
        return self.value(name, node.where)

    def is_const(self, node: _Node, i: int) -> bool:
        return node.input(i) in self.consts

    def const(self, node: _Node, i: int, what: str) -> Array:
        """The compile-time value of input `i` of `node`, or a PlmrError."""
        name = node.input(i)
        arr = self.consts.get(name)
        if arr is None:
            raise node.error(
                f"its {what} (input {i}, '{name}') must be a compile-time constant, i.e. "
                "an initializer or the output of a Constant node, but it is computed at "
                "run time; plmr needs static shapes: fold it, e.g. with onnx-simplifier "
                "(onnxsim) after fixing the input shapes"
            )
        return arr

    def shape(self, node: _Node, i: int) -> Shape:
        """The static shape of input `i` of `node`, constant or not."""
        arr = self.consts.get(node.input(i))
        if arr is not None:
            return tuple(arr.shape)
        return _shape_of(self.tensor(node, i))

    def axes(self, node: _Node, input_index: int) -> list[int] | None:
        """Axes given as an `axes` attribute or as a constant input (None if neither)."""
        attr = node.ints_attr("axes")
        if attr is not None:
            return attr
        if node.input(input_index):
            return _int_list(self.const(node, input_index, "axes"))
        return None

    def check_unused(self, node: _Node, first: int, what: str) -> None:
        """Rejects a node whose optional outputs from `first` on are used."""
        for i in range(first, len(node.proto.output)):
            name = node.output(i)
            if name and name in self.used:
                raise node.error(
                    f"its output {i} ('{name}', {what}) is used, but plmr only imports "
                    f"output 0 of {node.op_type}; compute it with other ops instead"
                )

    # -- driver --------------------------------------------------------------------------

    def run(self) -> ModuleOp:
        if len(self.graph.sparse_initializer) > 0:
            raise PlmrError(
                f"the graph has sparse initializers "
                f"('{self.graph.sparse_initializer[0].values.name}', ...), which plmr "
                "does not support; store them as dense initializers"
            )
        for init in self.graph.initializer:
            self.consts[init.name] = _to_array(init, f"initializer '{init.name}'")
        inputs = [vi for vi in self.graph.input if vi.name not in self.consts]
        types = [_input_type(vi) for vi in inputs]
        self.block = Block(arg_types=types)
        for arg, vi in zip(self.block.args, inputs, strict=True):
            self.define(vi.name, arg)
        for index, proto in enumerate(self.graph.node):
            self.convert(_Node(proto, index))
        results = [self.output(vi) for vi in self.graph.output]
        self.block.add_op(func.ReturnOp(*results))
        fn = func.FuncOp(
            self.func_name,
            (types, [r.type for r in results]),
            Region(self.block),
            arg_attrs=_name_attrs([vi.name for vi in inputs]),
            res_attrs=_name_attrs([vi.name for vi in self.graph.output]),
        )
        module = ModuleOp([fn])
        try:
            module.verify()
        except VerifyException as e:
            raise PlmrError(
                f"the imported IR does not verify ({e}); this is a bug in the plmr ONNX "
                "importer: please report it with the model"
            ) from e
        return module

    def convert(self, node: _Node) -> None:
        """Converts one node, turning shape errors into PlmrErrors that name it."""
        proto = node.proto
        if proto.domain not in ("", "ai.onnx"):
            raise node.error(
                f"op '{proto.op_type}' of domain '{proto.domain}' is not supported: plmr "
                "imports only default-domain ONNX ops; export the model without custom "
                f"or contrib ops (supported ops: {', '.join(sorted(HANDLERS))})"
            )
        handler = HANDLERS.get(proto.op_type)
        if handler is None:
            raise node.error(
                f"ONNX op '{proto.op_type}' is not supported; supported ops: "
                f"{', '.join(sorted(HANDLERS))}. Rewrite the model with these ops (or "
                "simplify it with onnx-simplifier)"
            )
        for name in proto.input:
            if name and name not in self.values and name not in self.consts:
                raise node.error(
                    f"input '{name}' is not a graph input, an initializer or the output "
                    "of an earlier node; sort the graph topologically and check it with "
                    "onnx.checker.check_model"
                )
        try:
            handler(self, node)
        except VerifyException as e:
            shapes = ", ".join(
                f"'{n}': {_fmt_shape(self.shape(node, i))}"
                for i, n in enumerate(proto.input)
                if n
            )
            raise node.error(
                f"{e} (input shapes: {shapes}); the model is inconsistent, check it with "
                "onnx.checker.check_model(model, full_check=True)"
            ) from e

    def output(self, vi: onnx.ValueInfoProto) -> SSAValue:
        """The value of a graph output, checked against its declared type if static."""
        where = f"graph output '{vi.name}'"
        value = self.value(vi.name, where)
        t = vi.type
        if t.WhichOneof("value") != "tensor_type":
            return value
        tt = t.tensor_type
        kind = _ELEMENT_KINDS.get(tt.elem_type)
        got = graph.element_type(value)
        if tt.elem_type != onnx.TensorProto.UNDEFINED and (
            kind is None or kind.mlir != got
        ):
            raise PlmrError(
                f"{where} is declared as {_onnx_type_name(tt.elem_type)} but computes "
                f"{got}; fix the output's type in the model"
            )
        if tt.HasField("shape"):
            declared = [
                int(d.dim_value) if d.WhichOneof("value") == "dim_value" else None
                for d in tt.shape.dim
            ]
            shape = _shape_of(value)
            if len(declared) != len(shape) or any(
                d is not None and d != s for d, s in zip(declared, shape, strict=False)
            ):
                raise PlmrError(
                    f"{where} is declared with shape "
                    f"{_fmt_shape(['?' if d is None else d for d in declared])} but the "
                    f"graph computes {_fmt_shape(shape)}; fix the declared output shape "
                    "(e.g. run onnx.shape_inference.infer_shapes)"
                )
        return value

    # -- elementwise ops -----------------------------------------------------------------

    def scale_operands(
        self, node: _Node, data: int, scalar: int
    ) -> tuple[SSAValue, float] | None:
        """
        `(x, c)` if input `scalar` is a one-element float constant `c` and input `data`
        a float tensor `x` of the same type that alone determines the output shape
        (so that `x op c` is a `graph.scale`); None otherwise.
        """
        c = self.consts.get(node.input(scalar))
        if c is None or c.size != 1 or self.is_const(node, data):
            return None
        kind = _kind_of_dtype(c.dtype)
        x = self.tensor(node, data)
        elt = graph.element_type(x)
        if kind is None or kind.mlir != elt or not graph.is_float_type(elt):
            return None
        shape = _shape_of(x)
        if graph.broadcast_shapes(shape, tuple(c.shape)) != shape:
            return None
        return x, float(c.reshape(-1)[0])

    def op_add(self, node: _Node) -> None:
        self.binary(node, graph.AddOp)

    def op_sub(self, node: _Node) -> None:
        self.binary(node, graph.SubOp)

    def op_mul(self, node: _Node) -> None:
        """Product; by a scalar constant (either side) it is a `graph.scale`."""
        for data, scalar in ((0, 1), (1, 0)):
            operands = self.scale_operands(node, data, scalar)
            if operands is not None:
                self.define(node.output(0), self.emit(graph.ScaleOp(*operands)))
                return
        self.binary(node, graph.MulOp)

    def op_div(self, node: _Node) -> None:
        """Division; by a scalar constant it is a `graph.scale` by the reciprocal."""
        operands = self.scale_operands(node, 0, 1)
        if operands is None or operands[1] == 0.0:
            self.binary(node, graph.DivOp)
            return
        x, c = operands
        self.define(node.output(0), self.emit(graph.ScaleOp(x, 1.0 / c)))

    def binary(
        self, node: _Node, op: Callable[[SSAValue, SSAValue], graph.BinaryElementwiseOp]
    ) -> None:
        a, b = self.tensor(node, 0), self.tensor(node, 1)
        self.define(node.output(0), self.emit(op(a, b)))

    def op_pow(self, node: _Node) -> None:
        """`x^e` for a constant `e` of 2 (mul), 0.5 (sqrt) or 1 (identity)."""
        exponent = self.const(node, 1, "exponent")
        distinct = set(np.asarray(exponent, dtype=np.float64).reshape(-1).tolist())
        if len(distinct) != 1:
            raise node.error(
                f"the exponent must hold one value (it holds {len(distinct)} distinct "
                "values); plmr supports Pow only with a constant exponent 0.5, 1 or 2"
            )
        e = float(distinct.pop())
        x = self.tensor(node, 0)
        shape = _shape_of(x)
        if graph.broadcast_shapes(shape, tuple(exponent.shape)) != shape:
            raise node.error(
                f"the exponent of shape {_fmt_shape(exponent.shape)} would broadcast the "
                f"base of shape {_fmt_shape(shape)}; plmr supports only exponents that "
                "keep the base's shape"
            )
        if e == 2.0:
            self.define(node.output(0), self.emit(graph.MulOp(x, x)))
        elif e == 0.5:
            self.define(node.output(0), self.emit(graph.SqrtOp(x)))
        elif e == 1.0:
            self.define(node.output(0), x)
        else:
            raise node.error(
                f"exponent {e:g} is not supported (only 0.5, 1 and 2); rewrite x^{e:g} "
                "with Mul, Sqrt, Exp or other supported ops"
            )

    def op_gelu(self, node: _Node) -> None:
        """Gelu (opset 20), exact or with the tanh approximation."""
        approximate = node.str_attr("approximate", "none")
        if approximate not in ("none", "tanh"):
            raise node.unsupported_attr(
                "approximate", f"'{approximate}'", "'none' or 'tanh'"
            )
        x = self.tensor(node, 0)
        self.define(node.output(0), self.emit(graph.GeluOp(x, tanh=approximate == "tanh")))

    def op_identity(self, node: _Node) -> None:
        """Binds the output name to the input's value."""
        name = node.input(0)
        if name in self.consts:
            self.define_const(node.output(0), self.consts[name])
            return
        self.define(node.output(0), self.tensor(node, 0))

    # -- matrix products -----------------------------------------------------------------

    def op_matmul(self, node: _Node) -> None:
        """numpy matmul: 1-D operands are reshaped to matrices and back."""
        a, b = self.tensor(node, 0), self.tensor(node, 1)
        a_shape, b_shape = _shape_of(a), _shape_of(b)
        if not a_shape or not b_shape:
            raise node.error(
                "MatMul operands must have rank >= 1, got a scalar; fix the model"
            )
        if len(a_shape) == 1:
            a = self.emit(graph.ReshapeOp(a, (1, a_shape[0])))
        if len(b_shape) == 1:
            b = self.emit(graph.ReshapeOp(b, (b_shape[0], 1)))
        y = self.emit(graph.MatmulOp(a, b))
        out = list(_shape_of(y))
        if len(b_shape) == 1:
            del out[-1]
        if len(a_shape) == 1:
            del out[-2 if len(b_shape) > 1 else -1]
        if len(a_shape) == 1 or len(b_shape) == 1:
            y = self.emit(graph.ReshapeOp(y, out))
        self.define(node.output(0), y)

    def op_gemm(self, node: _Node) -> None:
        """`alpha·A'·B' + beta·C` as matmul, scale, add (beta folds into a constant C)."""
        alpha = node.float_attr("alpha", 1.0)
        beta = node.float_attr("beta", 1.0)
        trans_a = node.int_attr("transA", 0) != 0
        trans_b = node.int_attr("transB", 0) != 0
        a, b = self.tensor(node, 0), self.tensor(node, 1)
        for what, v in (("A", a), ("B", b)):
            if len(_shape_of(v)) != 2:
                raise node.error(
                    f"input {what} must be a matrix, got shape {_fmt_shape(_shape_of(v))}; "
                    "use MatMul for batched products"
                )
        y = self.emit(graph.MatmulOp(a, b, transpose_a=trans_a, transpose_b=trans_b))
        if alpha != 1.0:
            y = self.emit(graph.ScaleOp(y, alpha))
        if node.input(2) and beta != 0.0:
            c_name = node.input(2)
            c_const = self.consts.get(c_name)
            if c_const is not None and beta != 1.0:
                c_arr = (c_const * np.asarray(beta, dtype=c_const.dtype)).astype(
                    c_const.dtype
                )
                c = self.materialize(c_arr, f"{c_name}_times_beta", node.where)
            else:
                c = self.tensor(node, 2)
                if beta != 1.0:
                    c = self.emit(graph.ScaleOp(c, beta))
            out_shape = _shape_of(y)
            y = self.emit(graph.AddOp(y, c))
            if _shape_of(y) != out_shape:
                raise node.error(
                    f"C of shape {_fmt_shape(_shape_of(c))} does not broadcast to the "
                    f"{_fmt_shape(out_shape)} product; fix the model"
                )
        self.define(node.output(0), y)

    # -- shape ops -----------------------------------------------------------------------

    def reshape_to(self, node: _Node, shape: Sequence[int]) -> None:
        """Defines output 0 as input 0 reshaped to `shape` (folded if constant)."""
        out = tuple(shape)
        if self.is_const(node, 0):
            self.define_const(node.output(0), self.consts[node.input(0)].reshape(out))
            return
        x = self.tensor(node, 0)
        if _shape_of(x) == out:
            self.define(node.output(0), x)
            return
        self.define(node.output(0), self.emit(graph.ReshapeOp(x, out)))

    def op_reshape(self, node: _Node) -> None:
        """Reshape to a constant shape (0 copies a dim unless allowzero; -1 is inferred)."""
        target = _int_list(self.const(node, 1, "target shape"))
        allowzero = node.int_attr("allowzero", 0) != 0
        in_shape = self.shape(node, 0)
        out: list[int] = []
        infer: int | None = None
        for i, d in enumerate(target):
            if d == 0 and not allowzero:
                if i >= len(in_shape):
                    raise node.error(
                        f"shape entry {i} is 0 (copy the input dimension), but the input "
                        f"{_fmt_shape(in_shape)} has only {len(in_shape)} dimensions"
                    )
                out.append(in_shape[i])
            elif d == -1:
                if infer is not None:
                    raise node.error(
                        f"the target shape {target} has more than one -1; fix the model"
                    )
                infer = i
                out.append(1)
            elif d < 0:
                raise node.error(f"the target shape {target} has a negative entry {d}")
            else:
                out.append(d)
        total = math.prod(in_shape)
        if infer is not None:
            known = math.prod(out)
            if known == 0 or total % known != 0:
                raise node.error(
                    f"cannot infer the -1 in target shape {target} for an input of shape "
                    f"{_fmt_shape(in_shape)} ({total} elements)"
                )
            out[infer] = total // known
        if math.prod(out) != total:
            raise node.error(
                f"cannot reshape {_fmt_shape(in_shape)} ({total} elements) to "
                f"{_fmt_shape(out)} ({math.prod(out)} elements); fix the target shape"
            )
        self.reshape_to(node, out)

    def op_flatten(self, node: _Node) -> None:
        """Reshape to `[prod(shape[:axis]), prod(shape[axis:])]`."""
        in_shape = self.shape(node, 0)
        rank = len(in_shape)
        axis = node.int_attr("axis", 1)
        if not -rank <= axis <= rank:
            raise node.error(
                f"axis {axis} is out of range for an input of rank {rank} "
                f"(expected {-rank} <= axis <= {rank})"
            )
        if axis < 0:
            axis += rank
        self.reshape_to(node, (math.prod(in_shape[:axis]), math.prod(in_shape[axis:])))

    def normalize_axes(self, node: _Node, axes: Sequence[int], rank: int) -> list[int]:
        """Axes mapped into [0, rank); a PlmrError on an out-of-range or repeated axis."""
        out: list[int] = []
        for a in axes:
            if not -rank <= a < rank:
                raise node.error(
                    f"axis {a} is out of range for rank {rank} (expected {-rank} <= axis "
                    f"< {rank}); fix the model"
                )
            out.append(a % rank)
        if len(set(out)) != len(out):
            raise node.error(f"axes {list(axes)} contain a repeated axis; fix the model")
        return out

    def op_squeeze(self, node: _Node) -> None:
        """Drops the given size-1 axes (all size-1 axes without axes)."""
        in_shape = self.shape(node, 0)
        axes = self.axes(node, 1)
        if axes is None:
            drop = [i for i, d in enumerate(in_shape) if d == 1]
        else:
            drop = self.normalize_axes(node, axes, len(in_shape))
            for a in drop:
                if in_shape[a] != 1:
                    raise node.error(
                        f"cannot squeeze axis {a} of shape {_fmt_shape(in_shape)}: its "
                        f"size is {in_shape[a]}, not 1"
                    )
        self.reshape_to(node, [d for i, d in enumerate(in_shape) if i not in drop])

    def op_unsqueeze(self, node: _Node) -> None:
        """Inserts size-1 axes at the given positions of the output."""
        in_shape = self.shape(node, 0)
        axes = self.axes(node, 1)
        if axes is None:
            raise node.error("Unsqueeze needs axes (input 1); fix the model")
        rank = len(in_shape) + len(axes)
        new = self.normalize_axes(node, axes, rank)
        dims = iter(in_shape)
        self.reshape_to(node, [1 if i in new else next(dims) for i in range(rank)])

    def op_transpose(self, node: _Node) -> None:
        """Permutes the dimensions (`perm` defaults to reversing them)."""
        in_shape = self.shape(node, 0)
        perm = node.ints_attr("perm")
        if perm is None:
            perm = list(reversed(range(len(in_shape))))
        if sorted(perm) != list(range(len(in_shape))):
            raise node.error(
                f"perm {perm} is not a permutation of the {len(in_shape)} dimensions of "
                f"the input {_fmt_shape(in_shape)}; fix the model"
            )
        if self.is_const(node, 0):
            arr = self.consts[node.input(0)]
            self.define_const(node.output(0), np.ascontiguousarray(arr.transpose(perm)))
            return
        x = self.tensor(node, 0)
        self.define(node.output(0), self.emit(graph.TransposeOp(x, perm)))

    def op_concat(self, node: _Node) -> None:
        """Concatenation along `axis` (folded if every input is constant)."""
        axis_attr = node.attr("axis")
        if axis_attr is None:
            raise node.error("the required attribute 'axis' is missing; fix the model")
        axis = node.int_attr("axis", 0)
        names = [n for n in node.proto.input if n]
        if not names:
            raise node.error("Concat needs at least one input; fix the model")
        if all(n in self.consts for n in names):
            arrays = [self.consts[n] for n in names]
            rank = arrays[0].ndim
            (ax,) = self.normalize_axes(node, [axis], rank)
            self.define_const(node.output(0), np.concatenate(arrays, axis=ax))
            return
        values = [self.value(n, node.where) for n in names]
        (ax,) = self.normalize_axes(node, [axis], len(_shape_of(values[0])))
        self.define(node.output(0), self.emit(graph.ConcatOp(values, ax)))

    def op_split(self, node: _Node) -> None:
        """Split by constant sizes, by `num_outputs` (last chunk smaller), or equally."""
        in_shape = self.shape(node, 0)
        (axis,) = self.normalize_axes(node, [node.int_attr("axis", 0)], len(in_shape))
        dim = in_shape[axis]
        n_out = len(node.proto.output)
        num_outputs = node.int_attr("num_outputs", 0)
        if node.input(1):
            sizes = _int_list(self.const(node, 1, "split sizes"))
        elif num_outputs > 0:
            if num_outputs != n_out:
                raise node.error(
                    f"num_outputs = {num_outputs} but the node has {n_out} outputs; fix "
                    "the model"
                )
            chunk = -(-dim // num_outputs)
            sizes = [chunk] * (num_outputs - 1) + [dim - chunk * (num_outputs - 1)]
        else:
            if dim % n_out != 0:
                raise node.error(
                    f"axis {axis} of size {dim} cannot be split into {n_out} equal parts; "
                    "give the split sizes as input 1"
                )
            sizes = [dim // n_out] * n_out
        if len(sizes) != n_out or sum(sizes) != dim or any(s < 0 for s in sizes):
            raise node.error(
                f"split sizes {sizes} do not divide axis {axis} of size {dim} into the "
                f"node's {n_out} outputs; fix the model"
            )
        if self.is_const(node, 0):
            arr = self.consts[node.input(0)]
            bounds = np.cumsum(sizes)[:-1]
            for name, part in zip(
                node.proto.output, np.split(arr, bounds, axis=axis), strict=True
            ):
                self.define_const(name, np.ascontiguousarray(part))
            return
        op = graph.SplitOp(self.tensor(node, 0), axis, sizes)
        self.block.add_op(op)
        for name, result in zip(node.proto.output, op.results, strict=True):
            self.define(name, result)

    def op_gather(self, node: _Node) -> None:
        """Gather along `axis`; constant indices are range-checked here."""
        data_shape = self.shape(node, 0)
        if not data_shape:
            raise node.error("Gather data must have rank >= 1, got a scalar; fix the model")
        (axis,) = self.normalize_axes(node, [node.int_attr("axis", 0)], len(data_shape))
        indices = self.consts.get(node.input(1))
        if indices is not None:
            if indices.dtype.kind not in "iu":
                raise node.error(
                    f"indices must be integers, got {indices.dtype}; fix the model"
                )
            size = data_shape[axis]
            if indices.size and (indices.min() < -size or indices.max() >= size):
                raise node.error(
                    f"indices span [{indices.min()}, {indices.max()}] but axis {axis} of "
                    f"the data {_fmt_shape(data_shape)} has size {size}; fix the indices"
                )
            if self.is_const(node, 0):
                data = self.consts[node.input(0)]
                taken = np.take(data, indices.astype(np.int64), axis=axis)
                self.define_const(node.output(0), np.ascontiguousarray(taken))
                return
        data_v, idx_v = self.tensor(node, 0), self.tensor(node, 1)
        self.define(node.output(0), self.emit(graph.GatherOp(data_v, idx_v, axis)))

    # -- reductions and normalizations ---------------------------------------------------

    def reduce(self, node: _Node, kind: graph.ReduceKind) -> None:
        """ReduceX with axes as attribute or input, keepdims and noop_with_empty_axes."""
        x = self.tensor(node, 0)
        shape = _shape_of(x)
        axes = self.axes(node, 1)
        keepdims = node.int_attr("keepdims", 1) != 0
        noop = node.int_attr("noop_with_empty_axes", 0) != 0
        if not axes:
            if noop or not shape:
                self.define(node.output(0), x)
                return
            axes = list(range(len(shape)))
        norm = self.normalize_axes(node, axes, len(shape))
        self.define(node.output(0), self.emit(graph.ReduceOp(kind, x, norm, keepdims)))

    def op_reduce_sum(self, node: _Node) -> None:
        self.reduce(node, graph.ReduceKind.SUM)

    def op_reduce_max(self, node: _Node) -> None:
        self.reduce(node, graph.ReduceKind.MAX)

    def op_reduce_min(self, node: _Node) -> None:
        self.reduce(node, graph.ReduceKind.MIN)

    def op_reduce_mean(self, node: _Node) -> None:
        self.reduce(node, graph.ReduceKind.MEAN)

    def op_softmax(self, node: _Node) -> None:
        """Softmax along one axis (opset 13 semantics)."""
        x = self.tensor(node, 0)
        rank = len(_shape_of(x))
        (axis,) = self.normalize_axes(node, [node.int_attr("axis", -1)], rank)
        self.define(node.output(0), self.emit(graph.SoftmaxOp(x, axis - rank)))

    def op_layer_normalization(self, node: _Node) -> None:
        """LayerNormalization from `axis` on, optional bias; output 0 only."""
        self.check_unused(node, 1, "the mean or inverse standard deviation")
        x = self.tensor(node, 0)
        rank = len(_shape_of(x))
        (axis,) = self.normalize_axes(node, [node.int_attr("axis", -1)], rank)
        epsilon = node.float_attr("epsilon", 1e-5)
        scale = self.tensor(node, 1)
        bias = self.tensor(node, 2) if node.input(2) else None
        op = graph.LayerNormOp(x, scale, bias, axis - rank, epsilon)
        self.define(node.output(0), self.emit(op))

    # -- convolution and pooling ---------------------------------------------------------

    def window_pads(
        self,
        node: _Node,
        in_hw: Sequence[int],
        kernel: Sequence[int],
        strides: Sequence[int],
        dilations: Sequence[int],
    ) -> list[int]:
        """`[top, left, bottom, right]` from the `pads` and `auto_pad` attributes."""
        auto_pad = node.str_attr("auto_pad", "NOTSET")
        if auto_pad == "NOTSET":
            pads = node.ints_attr("pads") or [0, 0, 0, 0]
            if len(pads) != 4 or any(p < 0 for p in pads):
                raise node.error(
                    f"attribute pads = {pads} must be four non-negative integers "
                    "[top, left, bottom, right] for a 2-D window; fix the model"
                )
            return pads
        if auto_pad == "VALID":
            return [0, 0, 0, 0]
        if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            raise node.unsupported_attr(
                "auto_pad", f"'{auto_pad}'", "NOTSET, VALID, SAME_UPPER or SAME_LOWER"
            )
        lo: list[int] = []
        hi: list[int] = []
        for size, k, s, d in zip(in_hw, kernel, strides, dilations, strict=True):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            lo.append(small if auto_pad == "SAME_UPPER" else big)
            hi.append(big if auto_pad == "SAME_UPPER" else small)
        return [lo[0], lo[1], hi[0], hi[1]]

    def window_ints(self, node: _Node, name: str, default: Sequence[int]) -> list[int]:
        """A two-element window attribute (`strides`, `dilations`, `kernel_shape`)."""
        values = node.ints_attr(name)
        if values is None:
            return list(default)
        if len(values) != 2 or any(v <= 0 for v in values):
            raise node.error(
                f"attribute {name} = {values} must be two positive integers for a 2-D "
                "window; plmr supports only 2-D convolution and pooling"
            )
        return values

    def check_nchw(self, node: _Node, shape: Shape) -> None:
        if len(shape) != 4:
            raise node.error(
                f"the input has shape {_fmt_shape(shape)} (rank {len(shape)}), but plmr "
                f"supports only 2-D {node.op_type} on NCHW (rank-4) inputs; reshape 1-D "
                "or 3-D windows to 2-D in the model"
            )

    def op_conv(self, node: _Node) -> None:
        """2-D convolution (NCHW), with pads / auto_pad, strides, dilations and groups."""
        x, w = self.tensor(node, 0), self.tensor(node, 1)
        x_shape, w_shape = _shape_of(x), _shape_of(w)
        self.check_nchw(node, x_shape)
        if len(w_shape) != 4:
            raise node.error(
                f"the weight has shape {_fmt_shape(w_shape)}; plmr supports only 2-D "
                "convolution (an MCkHkW weight)"
            )
        kernel = self.window_ints(node, "kernel_shape", w_shape[2:])
        if tuple(kernel) != w_shape[2:]:
            raise node.error(
                f"attribute kernel_shape = {kernel} does not match the weight shape "
                f"{_fmt_shape(w_shape)}; fix the model"
            )
        strides = self.window_ints(node, "strides", (1, 1))
        dilations = self.window_ints(node, "dilations", (1, 1))
        groups = node.int_attr("group", 1)
        pads = self.window_pads(node, x_shape[2:], kernel, strides, dilations)
        bias = self.tensor(node, 2) if node.input(2) else None
        op = graph.Conv2dOp(
            x, w, bias, strides=strides, pads=pads, dilations=dilations, groups=groups
        )
        self.define(node.output(0), self.emit(op))

    def pool(self, node: _Node, kind: graph.PoolKind) -> None:
        """2-D max / average pooling; ceil_mode and dilations other than 1 are rejected."""
        x = self.tensor(node, 0)
        x_shape = _shape_of(x)
        self.check_nchw(node, x_shape)
        if node.attr("kernel_shape") is None:
            raise node.error("the required attribute 'kernel_shape' is missing")
        kernel = self.window_ints(node, "kernel_shape", (1, 1))
        ceil_mode = node.int_attr("ceil_mode", 0)
        if ceil_mode != 0:
            raise node.unsupported_attr(
                "ceil_mode",
                ceil_mode,
                "only ceil_mode = 0; pad the input so that the windows fit exactly, or "
                "use explicit pads",
            )
        dilations = node.ints_attr("dilations")
        if dilations is not None and any(d != 1 for d in dilations):
            raise node.unsupported_attr("dilations", dilations, "only dilations of 1")
        strides = self.window_ints(node, "strides", (1, 1))
        pads = self.window_pads(node, x_shape[2:], kernel, strides, (1, 1))
        count_include_pad = node.int_attr("count_include_pad", 0) != 0
        op = graph.PoolOp(
            kind,
            x,
            kernel,
            strides=strides,
            pads=pads,
            count_include_pad=count_include_pad and kind == graph.PoolKind.AVG,
        )
        self.define(node.output(0), self.emit(op))

    def op_max_pool(self, node: _Node) -> None:
        self.check_unused(node, 1, "the argmax indices")
        self.pool(node, graph.PoolKind.MAX)

    def op_average_pool(self, node: _Node) -> None:
        self.pool(node, graph.PoolKind.AVG)

    # -- constants -----------------------------------------------------------------------

    def op_constant(self, node: _Node) -> None:
        """A compile-time value from value, value_float(s) or value_int(s)."""
        attrs = list(node.proto.attribute)
        if len(attrs) != 1:
            raise node.error(
                f"a Constant needs exactly one value attribute, got {len(attrs)}; fix "
                "the model"
            )
        a = attrs[0]
        if a.name == "value":
            arr = _to_array(a.t, f"the value of {node.where}")
        elif a.name == "value_float":
            arr = np.asarray(a.f, dtype=np.float32)
        elif a.name == "value_floats":
            arr = np.asarray(list(a.floats), dtype=np.float32)
        elif a.name == "value_int":
            arr = np.asarray(a.i, dtype=np.int64)
        elif a.name == "value_ints":
            arr = np.asarray(list(a.ints), dtype=np.int64)
        else:
            raise node.unsupported_attr(
                a.name, "...", "value, value_float(s) and value_int(s) are supported"
            )
        self.define_const(node.output(0), arr)


def _unary(op: Callable[[SSAValue], Operation]) -> Handler:
    """A handler for an elementwise unary ONNX op that maps to one `graph` op."""

    def handle(importer: _Importer, node: _Node) -> None:
        x = importer.tensor(node, 0)
        importer.define(node.output(0), importer.emit(op(x)))

    return handle


def _name_attrs(names: Sequence[str]) -> ArrayAttr[DictionaryAttr]:
    return ArrayAttr([DictionaryAttr({NAME_ATTR: StringAttr(n)}) for n in names])


HANDLERS: dict[str, Handler] = {
    "Add": _Importer.op_add,
    "AveragePool": _Importer.op_average_pool,
    "Concat": _Importer.op_concat,
    "Constant": _Importer.op_constant,
    "Conv": _Importer.op_conv,
    "Div": _Importer.op_div,
    "Erf": _unary(graph.ErfOp),
    "Exp": _unary(graph.ExpOp),
    "Flatten": _Importer.op_flatten,
    "Gather": _Importer.op_gather,
    "Gelu": _Importer.op_gelu,
    "Gemm": _Importer.op_gemm,
    "Identity": _Importer.op_identity,
    "LayerNormalization": _Importer.op_layer_normalization,
    "MatMul": _Importer.op_matmul,
    "MaxPool": _Importer.op_max_pool,
    "Mul": _Importer.op_mul,
    "Neg": _unary(graph.NegOp),
    "Pow": _Importer.op_pow,
    "ReduceMax": _Importer.op_reduce_max,
    "ReduceMean": _Importer.op_reduce_mean,
    "ReduceMin": _Importer.op_reduce_min,
    "ReduceSum": _Importer.op_reduce_sum,
    "Relu": _unary(graph.ReluOp),
    "Reshape": _Importer.op_reshape,
    "Sigmoid": _unary(graph.SigmoidOp),
    "Softmax": _Importer.op_softmax,
    "Split": _Importer.op_split,
    "Sqrt": _unary(graph.SqrtOp),
    "Squeeze": _Importer.op_squeeze,
    "Sub": _Importer.op_sub,
    "Tanh": _unary(graph.TanhOp),
    "Transpose": _Importer.op_transpose,
    "Unsqueeze": _Importer.op_unsqueeze,
}
"""How each supported ONNX op (default domain) is imported."""

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(HANDLERS))
"""The ONNX ops `import_onnx` accepts."""


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def import_onnx(model: onnx.ModelProto, *, func_name: str = "main") -> ModuleOp:
    """
    Imports the main graph of an ONNX model as a module with one `func.func @func_name`
    of `graph` ops (see the module docstring); raises PlmrError on anything plmr cannot
    represent.
    """
    return _Importer(model, func_name).run()


def import_onnx_file(path: str, *, func_name: str = "main") -> ModuleOp:
    """Loads an `.onnx` file (with its external data) and imports it like `import_onnx`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PlmrError(
            f"cannot read the ONNX model '{path}': {e.strerror or e}; check the path"
        ) from e
    try:
        model = onnx.load_model_from_string(data)
    except DecodeError as e:
        raise PlmrError(
            f"'{path}' is not a valid ONNX model (protobuf parse error: {e}); pass a "
            "file written by onnx.save"
        ) from e
    if not model.HasField("graph"):
        raise PlmrError(
            f"'{path}' holds no ONNX graph (is it an empty file or another protobuf?); "
            "pass a model written by onnx.save"
        )
    try:
        external_data_helper.load_external_data_for_model(model, os.path.dirname(path))
    except (OSError, ValueError, onnx.checker.ValidationError) as e:
        raise PlmrError(
            f"cannot load the external data of the ONNX model '{path}': {e}; keep the "
            "data files next to the model, as onnx.save wrote them"
        ) from e
    return import_onnx(model, func_name=func_name)
