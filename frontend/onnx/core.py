"""
The importer's core: element types, typed node access, the `Importer` (values, constants,
the driver that converts node by node) and the public entry points.

Handlers live in the sibling modules by role (`elementwise`, `shapes`, `linalg`, `nn`,
`conv`) and register themselves in `HANDLERS` with `@handles("OnnxOp", ...)`; `folding`
evaluates nodes whose inputs are all compile-time constants.
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
from onnx import version_converter
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
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from plmr.dialects import graph
from plmr.errors import PlmrError
from plmr.frontend.onnx.folding import FoldError, fold_node, foldable
from plmr.frontend.onnx.weights import (
    LazyTensor,
    WeightSink,
    WeightsOptions,
    external_location,
    to_array,
)

Array = npt.NDArray[Any]
Shape = tuple[int, ...]
Notify = Callable[[str], None]

MIN_OPSET = 13
"""The oldest default-domain ONNX opset imported as is; older models are converted to it."""

MAX_OPSET = onnx.defs.onnx_opset_version()
"""The newest default-domain ONNX opset the importer accepts (the installed onnx's)."""

NAME_ATTR = "plmr.name"
"""The argument / result attribute that records a value's ONNX name."""


# ---------------------------------------------------------------------------------------
# Element types
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElementKind:
    """An ONNX element type plmr supports: its MLIR type and little-endian numpy dtype."""

    mlir: AnyDenseElement
    dtype: np.dtype[Any]
    name: str


ELEMENT_KINDS: dict[int, ElementKind] = {
    onnx.TensorProto.FLOAT: ElementKind(f32, np.dtype("<f4"), "float32"),
    onnx.TensorProto.FLOAT16: ElementKind(Float16Type(), np.dtype("<f2"), "float16"),
    onnx.TensorProto.DOUBLE: ElementKind(f64, np.dtype("<f8"), "float64"),
    onnx.TensorProto.INT64: ElementKind(i64, np.dtype("<i8"), "int64"),
    onnx.TensorProto.INT32: ElementKind(i32, np.dtype("<i4"), "int32"),
    onnx.TensorProto.BOOL: ElementKind(i1, np.dtype(np.bool_), "bool"),
}

_SUPPORTED_TYPES = ", ".join(k.name for k in ELEMENT_KINDS.values())


def kind_of_dtype(dtype: np.dtype[Any]) -> ElementKind | None:
    """The supported element kind holding values of a numpy dtype, if any."""
    for kind in ELEMENT_KINDS.values():
        if kind.dtype.kind == dtype.kind and kind.dtype.itemsize == dtype.itemsize:
            return kind
    return None


def numpy_dtype_of(value: SSAValue) -> np.dtype[Any]:
    """The numpy dtype of a supported tensor value's elements."""
    elt = graph.element_type(value)
    for kind in ELEMENT_KINDS.values():
        if kind.mlir == elt:
            return kind.dtype
    raise PlmrError(f"element type {elt} has no ONNX equivalent plmr supports")


def onnx_type_name(elem_type: int) -> str:
    """The ONNX spelling of a TensorProto data type, e.g. `FLOAT16`."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"data type {elem_type}"


def dense(arr: Array, kind: ElementKind) -> DenseIntOrFPElementsAttr:
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


def fmt_shape(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def int_list(arr: Array) -> list[int]:
    """The elements of an integer array as Python ints, row-major."""
    return [int(v) for v in np.asarray(arr).reshape(-1).tolist()]


def shape_of(value: SSAValue) -> Shape:
    return graph.static_shape(value, "value")


@dataclass
class Node:
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


Handler = Callable[["Importer", Node], None]

HANDLERS: dict[str, Handler] = {}
"""How each supported ONNX op (default domain) is imported, filled by `@handles`."""


def handles(*op_types: str) -> Callable[[Handler], Handler]:
    """Registers the decorated function as the handler of the ONNX ops `op_types`."""

    def register(handler: Handler) -> Handler:
        for op_type in op_types:
            HANDLERS[op_type] = handler
        return handler

    return register


def supported_ops_text() -> str:
    """The supported ONNX ops, comma-separated, for error messages."""
    return ", ".join(sorted(HANDLERS))


# ---------------------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------------------


def _default_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset, or a PlmrError if there is none."""
    versions = [int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise PlmrError(
            "the model imports no default-domain ONNX opset (opset_import has no entry "
            f"for domain ''); plmr supports opsets up to {MAX_OPSET}: add one, "
            "e.g. onnx.helper.make_opsetid('', 17)"
        )
    return versions[0]


def upgrade_opset(model: onnx.ModelProto, notify: Notify | None = None) -> onnx.ModelProto:
    """
    `model` itself if its default-domain opset is in [MIN_OPSET, MAX_OPSET]; converted to
    MIN_OPSET with `onnx.version_converter` (saying so through `notify`) if older; a
    PlmrError if newer or if the conversion fails.
    """
    version = _default_opset(model)
    if version > MAX_OPSET:
        raise PlmrError(
            f"the model uses ONNX opset {version}, but the installed onnx package knows "
            f"opsets up to {MAX_OPSET}; upgrade onnx or export the model at opset "
            f"{MAX_OPSET} or older"
        )
    if version >= MIN_OPSET:
        return model
    try:
        converted = version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:  # the converter raises bare RuntimeErrors and others
        raise PlmrError(
            f"the model uses ONNX opset {version}; plmr converts models older than opset "
            f"{MIN_OPSET} with onnx.version_converter, which failed: "
            f"{str(e).strip() or type(e).__name__}. Export the model at opset "
            f"{MIN_OPSET} or newer"
        ) from e
    if notify is not None:
        notify(
            f"note: converted the model from ONNX opset {version} to {MIN_OPSET} with "
            "onnx.version_converter"
        )
    return converted


def _input_type(vi: onnx.ValueInfoProto) -> TensorType[Attribute]:
    """The static tensor type of a graph input, or a PlmrError saying how to fix it."""
    name = vi.name
    if vi.type.WhichOneof("value") != "tensor_type":
        raise PlmrError(
            f"graph input '{name}' is not a tensor (its type is "
            f"{vi.type.WhichOneof('value') or 'missing'}); plmr imports tensor inputs only"
        )
    tt = vi.type.tensor_type
    kind = ELEMENT_KINDS.get(tt.elem_type)
    if kind is None:
        raise PlmrError(
            f"graph input '{name}' has element type {onnx_type_name(tt.elem_type)}, "
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
            f"{fmt_shape(dims)} has {what}; plmr needs static shapes. Fix the shape "
            "before importing, e.g. with onnx.tools.update_model_dims."
            f"update_inputs_outputs_dims(model, {{'{name}': {fixed}, ...}}, "
            "{<output name>: <output shape>, ...}), or export the model with fixed sizes"
        )
    return TensorType(kind.mlir, [d for d in dims if isinstance(d, int)])


class Importer:
    """Converts the main graph of one ONNX model, node by node, into a block of ops."""

    def __init__(
        self,
        model: onnx.ModelProto,
        func_name: str,
        notify: Notify | None = None,
        weights: WeightsOptions | None = None,
        base_dir: str = "",
    ):
        if not model.HasField("graph"):
            raise PlmrError(
                "the ONNX model has no graph (is it an empty or non-model protobuf?); "
                "pass a model saved with onnx.save"
            )
        self.source_opset = _default_opset(model)
        """The default-domain opset the model was written for (before conversion)."""
        model = upgrade_opset(model, notify)
        self.model = model
        self.graph = model.graph
        self.func_name = func_name
        self.opset = _default_opset(model)
        self.values: dict[str, SSAValue] = {}
        """SSA values of the ONNX names defined so far (arguments, results, constants)."""
        self.consts: dict[str, Array] = {}
        """Compile-time values: initializers, Constant outputs and folded results."""
        self.lazy: dict[str, LazyTensor] = {}
        """Initializers kept out of the IR, read only if a handler needs their values."""
        self.sink = None if weights is None else WeightSink(weights)
        self.base_dir = base_dir
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
        lazy = self.lazy.get(name)
        if lazy is not None:
            result = self.reference(name, lazy)
            self.define(name, result)
            return result
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
        kind = kind_of_dtype(arr.dtype)
        if kind is None:
            raise PlmrError(
                f"{where}: constant '{name}' has element type {arr.dtype}, which plmr "
                f"does not support (supported: {_SUPPORTED_TYPES}); convert it in the "
                "model"
            )
        sink = self.sink
        if (
            sink is not None
            and sink.writer is not None
            and sink.out_of_line(arr.nbytes, arr.size)
        ):
            stored = sink.unique(name)
            sink.writer.add_array(stored, np.ascontiguousarray(arr, dtype=kind.dtype))
            file = str(sink.writer.path.resolve())
            t = TensorType(kind.mlir, arr.shape)
            result = self.emit(graph.WeightOp(stored, file, t))
        else:
            result = self.emit(graph.ConstantOp(dense(arr, kind)))
        result.name_hint = ssa_name(name)
        return result

    def reference(self, name: str, lazy: LazyTensor) -> SSAValue:
        """A new `graph.weight` for an initializer kept out of the IR."""
        t = TensorType(lazy.mlir, lazy.shape)
        if lazy.external is not None:
            path, offset = lazy.external
            op = graph.WeightOp(name, str(path), t, offset)
        else:
            sink = self.sink
            assert sink is not None
            assert sink.writer is not None
            stored = sink.unique(name)
            sink.writer.add(stored, lazy.dtype, lazy.shape, lazy.write)
            op = graph.WeightOp(stored, str(sink.writer.path.resolve()), t)
        result = self.emit(op)
        result.name_hint = ssa_name(name)
        return result

    def keep_out(self, init: onnx.TensorProto) -> LazyTensor | None:
        """The initializer as a reference, or None if it stays a compile-time value."""
        sink = self.sink
        kind = ELEMENT_KINDS.get(init.data_type)
        if sink is None or kind is None or any(d < 0 for d in init.dims):
            return None
        shape = tuple(int(d) for d in init.dims)
        nbytes = math.prod(shape) * kind.dtype.itemsize
        if not sink.out_of_line(nbytes, math.prod(shape)):
            return None
        if init.data_location == onnx.TensorProto.EXTERNAL:
            external = external_location(init, self.base_dir, nbytes)
            return LazyTensor(init, kind.dtype, kind.mlir, shape, self.base_dir, external)
        if sink.writer is None:
            return None
        return LazyTensor(init, kind.dtype, kind.mlir, shape, self.base_dir, None)

    def result(self, node: Node, value: SSAValue | Operation) -> None:
        """Defines output 0 of `node` as `value` (an op is appended first)."""
        if isinstance(value, Operation):
            value = self.emit(value)
        self.define(node.output(0), value)

    def constant_like(
        self, like: SSAValue, arr: Array | float, name: str, where: str
    ) -> SSAValue:
        """A `graph.constant` of `arr` in the element type of the tensor `like`."""
        dtype = numpy_dtype_of(like)
        return self.materialize(np.asarray(arr).astype(dtype), name, where)

    def tensor(self, node: Node, i: int) -> SSAValue:
        """The SSA value of input `i` of `node` (which must be present)."""
        name = node.input(i)
        if not name:
            raise node.error(f"input {i} is missing but required; fix the model")
        return self.value(name, node.where)

    def is_const(self, node: Node, i: int) -> bool:
        return node.input(i) in self.consts

    def const(self, node: Node, i: int, what: str) -> Array:
        """
        The compile-time value of input `i` of `node`, or a PlmrError; an initializer
        kept out of the IR is read here (the handler must see its values).
        """
        name = node.input(i)
        lazy = self.lazy.get(name)
        if lazy is not None:
            return lazy.load()
        arr = self.consts.get(name)
        if arr is None:
            raise node.error(
                f"its {what} (input {i}, '{name}') must be a compile-time constant, i.e. "
                "an initializer or the output of a Constant node, but it is computed at "
                "run time; plmr needs static shapes: fold it, e.g. with onnx-simplifier "
                "(onnxsim) after fixing the input shapes"
            )
        return arr

    def shape(self, node: Node, i: int) -> Shape:
        """The static shape of input `i` of `node`, constant or not."""
        arr = self.consts.get(node.input(i))
        if arr is not None:
            return tuple(arr.shape)
        lazy = self.lazy.get(node.input(i))
        if lazy is not None:
            return lazy.shape
        return shape_of(self.tensor(node, i))

    def axes(self, node: Node, input_index: int) -> list[int] | None:
        """Axes given as an `axes` attribute or as a constant input (None if neither)."""
        attr = node.ints_attr("axes")
        if attr is not None:
            return attr
        if node.input(input_index):
            return int_list(self.const(node, input_index, "axes"))
        return None

    def check_unused(self, node: Node, first: int, what: str) -> None:
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
            lazy = self.keep_out(init)
            if lazy is not None:
                self.lazy[init.name] = lazy
            else:
                where = f"initializer '{init.name}'"
                self.consts[init.name] = to_array(init, where, self.base_dir)
        known = self.consts.keys() | self.lazy.keys()
        inputs = [vi for vi in self.graph.input if vi.name not in known]
        types = [_input_type(vi) for vi in inputs]
        self.block = Block(arg_types=types)
        for arg, vi in zip(self.block.args, inputs, strict=True):
            self.define(vi.name, arg)
        for index, proto in enumerate(self.graph.node):
            self.convert(Node(proto, index))
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
        if self.sink is not None and self.sink.writer is not None and len(self.sink.writer):
            self.sink.writer.write()
        return module

    def convert(self, node: Node) -> None:
        """
        Converts one node: evaluated at import if all its inputs are compile-time
        constants, else by its handler; shape errors become PlmrErrors that name it.
        """
        proto = node.proto
        if proto.domain not in ("", "ai.onnx"):
            raise node.error(
                f"op '{proto.op_type}' of domain '{proto.domain}' is not supported: plmr "
                "imports only default-domain ONNX ops; export the model without custom "
                f"or contrib ops (supported ops: {supported_ops_text()})"
            )
        for name in proto.input:
            if name and not (
                name in self.values or name in self.consts or name in self.lazy
            ):
                raise node.error(
                    f"input '{name}' is not a graph input, an initializer or the output "
                    "of an earlier node; sort the graph topologically and check it with "
                    "onnx.checker.check_model"
                )
        handler = HANDLERS.get(proto.op_type)
        if handler is None:
            # No op could take a weight by reference: read the ones this node uses.
            for name in proto.input:
                if name in self.lazy and name not in self.consts:
                    self.consts[name] = self.lazy[name].load()
        if self.fold(node, required=handler is None):
            return
        if handler is None:
            raise node.error(
                f"ONNX op '{proto.op_type}' is not supported; supported ops: "
                f"{supported_ops_text()} (and any op whose inputs are all constant, "
                "which is evaluated at import). Rewrite the model with these ops (or "
                "simplify it with onnx-simplifier)"
            )
        try:
            handler(self, node)
        except VerifyException as e:
            shapes = ", ".join(
                f"'{n}': {fmt_shape(self.shape(node, i))}"
                for i, n in enumerate(proto.input)
                if n
            )
            raise node.error(
                f"{e} (input shapes: {shapes}); the model is inconsistent, check it with "
                "onnx.checker.check_model(model, full_check=True)"
            ) from e

    def fold(self, node: Node, required: bool) -> bool:
        """
        Evaluates `node` at import if all its inputs are compile-time constants and its
        op can be (binding its outputs as constants); False if it is not evaluated. A
        failed evaluation is a PlmrError if `required` (no handler could take over).
        """
        names = [n for n in node.proto.input if n]
        if not names or any(n not in self.consts for n in names):
            return False
        if not foldable(node.proto):
            return False
        inputs = [self.consts[n] if n else None for n in node.proto.input]
        try:
            outputs = fold_node(node.proto, inputs, self.opset)
        except FoldError as e:
            if not required:
                return False
            raise node.error(
                f"all its inputs are constant, but evaluating it at import failed: {e}; "
                "fix the model"
            ) from e
        for name, arr in zip(node.proto.output, outputs, strict=False):
            self.define_const(name, arr)
        return True

    def output(self, vi: onnx.ValueInfoProto) -> SSAValue:
        """The value of a graph output, checked against its declared type if static."""
        where = f"graph output '{vi.name}'"
        value = self.value(vi.name, where)
        t = vi.type
        if t.WhichOneof("value") != "tensor_type":
            return value
        tt = t.tensor_type
        kind = ELEMENT_KINDS.get(tt.elem_type)
        got = graph.element_type(value)
        if tt.elem_type != onnx.TensorProto.UNDEFINED and (
            kind is None or kind.mlir != got
        ):
            raise PlmrError(
                f"{where} is declared as {onnx_type_name(tt.elem_type)} but computes "
                f"{got}; fix the output's type in the model"
            )
        if tt.HasField("shape"):
            declared = [
                int(d.dim_value) if d.WhichOneof("value") == "dim_value" else None
                for d in tt.shape.dim
            ]
            shape = shape_of(value)
            if len(declared) != len(shape) or any(
                d is not None and d != s for d, s in zip(declared, shape, strict=False)
            ):
                raise PlmrError(
                    f"{where} is declared with shape "
                    f"{fmt_shape(['?' if d is None else d for d in declared])} but the "
                    f"graph computes {fmt_shape(shape)}; fix the declared output shape "
                    "(e.g. run onnx.shape_inference.infer_shapes)"
                )
        return value

    # -- axes ----------------------------------------------------------------------------

    def normalize_axes(self, node: Node, axes: Sequence[int], rank: int) -> list[int]:
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


def _name_attrs(names: Sequence[str]) -> ArrayAttr[DictionaryAttr]:
    return ArrayAttr([DictionaryAttr({NAME_ATTR: StringAttr(n)}) for n in names])


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def import_onnx(
    model: onnx.ModelProto,
    *,
    func_name: str = "main",
    notify: Notify | None = None,
    weights: WeightsOptions | None = None,
    base_dir: str = "",
) -> ModuleOp:
    """
    Imports the main graph of an ONNX model as a module with one `func.func @func_name`
    of `graph` ops (see the package docstring); raises PlmrError on anything plmr cannot
    represent. `notify` receives one-line notices (e.g. that the opset was converted).
    With `weights`, large initializers become `graph.weight` references (see
    `WeightsOptions`); external data is read from `base_dir`.
    """
    return Importer(model, func_name, notify, weights, base_dir).run()


def import_onnx_file(
    path: str,
    *,
    func_name: str = "main",
    notify: Notify | None = None,
    weights: WeightsOptions | None = None,
) -> ModuleOp:
    """
    Loads an `.onnx` file and imports it like `import_onnx`. Its external data is never
    loaded whole: large initializers stored there are referenced in place (`weights`:
    by default `WeightsOptions()`, which keeps the other initializers inline).
    """
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
    return import_onnx(
        model,
        func_name=func_name,
        notify=notify,
        weights=WeightsOptions() if weights is None else weights,
        base_dir=os.path.dirname(os.path.abspath(path)),
    )
