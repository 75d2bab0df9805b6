"""
Weights by reference: `graph.weight`, a tensor whose values live in a weights file.

A weight names a tensor of a file beside the program instead of spelling its values in
the IR, so the IR of a layer stays kilobytes whatever its width. The file is a
safetensors file (the tensor is found by name) or raw data such as an ONNX model's
external data (`model.onnx.data`; the reference then carries the byte offset):

```mlir
%w = graph.weight "model.layers.0.mlp.up_proj.weight" in "llama.safetensors" : tensor<4096x14336xf32>
%e = graph.weight "val_88" in "model.onnx.data" at 32768 : tensor<64x64xf32>
```

A weight may be derived from references without their bytes: `rotate B` (rotate-half of
each block of `B` along the last axis, from `graph-fold-rotate-half`), `heads [A, ...]`
(a projection's `K x N` weight as one `K x D` weight per head, `A x ... x K x D` with
`N = A·...·D`, from `graph-fold-heads`), `rows [A, ...]` (an `N x M` weight as
`A x ... x M`, `N = A·...`: the rows of a projection that reads heads) and `concat AXIS
(...)` (the weights of merged
projections, from `graph-merge-matmuls`); the runtime computes them from the parts when
it needs the values:

```mlir
%r = graph.weight "q" in "model.onnx.data" at 0 rotate 16 : tensor<64x64xf32>
%h = graph.weight "q" in "model.onnx.data" at 0 heads [2, 2] : tensor<2x2x64x16xf32>
%o = graph.weight "o" in "model.onnx.data" at 0 rows [4, 16] : tensor<4x16x64xf32>
%m = graph.weight concat 1 ("q" in "model.onnx.data" at 0 : tensor<64x64xf32>, "k" in "model.onnx.data" at 16384 : tensor<64x32xf32>) : tensor<64x96xf32>
```

Passes treat a weight as an opaque value: nothing reads its bytes at compile time.
Below the graph level (`convert-graph-to-loop` and after) a weight is an
`arith.constant` whose value is a `dense_resource` and whose `plmr.weight` attribute holds
the same reference, so the code that places host constants on the mesh handles weights
as it handles any other constant:

```mlir
%w = arith.constant {plmr.weight = {file = "llama.safetensors", name = "..."}} dense_resource<w> : tensor<4096x14336xf32>
```

A reference's file is a path relative to the directory of the IR file it is written in
(or absolute). `anchor_weights` resolves them when a file is read (optionally from a
directory or file the weights moved to), `relocate_weights` makes them relative to the
directory an IR file is written to.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseResourceAttr,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.graph_base import GraphOp
from plmr.errors import PlmrError

WEIGHT_ATTR = "plmr.weight"
"""The attribute of a lowered weight (`arith.constant`) holding its reference."""


@dataclass(frozen=True)
class WeightRef:
    """
    A weight reference: tensor name, file, byte offset (raw data) and tensor type; or,
    with `parts`, the concatenation of other references along `axis` (its name then
    lists theirs and its file is empty). `rotate` > 0 applies rotate-half to blocks of
    `rotate` along the last axis (`[a, b] -> [-b, a]` in each block): the weight times
    RoPE's signed permutation. `heads` `(A, ...)` views the result, a `K x N` matrix
    (the `base_type`), as one `K x D` matrix per head: `type` is `A x ... x K x D`, with
    `N = A·...·D` and `w[a, ..., k, d] = base[k, (a, ..., d)]` (row-major), applied after
    `rotate`. `rows` `(A, ...)` views such a `N x M` result as `A x ... x M`
    (`N = A·...`, row-major: the same values).
    """

    name: str
    file: str
    offset: int | None
    type: TensorType
    rotate: int = 0
    parts: tuple[WeightRef, ...] = ()
    axis: int = 0
    heads: tuple[int, ...] = ()
    rows: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.type.get_shape())

    @property
    def base_shape(self) -> tuple[int, ...]:
        """The shape before `heads`/`rows`: what the file (or the concatenation) holds."""
        if self.rows:
            return (math.prod(self.rows), self.shape[-1])
        if not self.heads:
            return self.shape
        *_, k, d = self.shape
        return (k, math.prod(self.heads) * d)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def leaves(self) -> Iterator[WeightRef]:
        """The references to file data this one is made of (itself for a plain one)."""
        if not self.parts:
            yield self
            return
        for part in self.parts:
            yield from part.leaves()

    def with_files(self, move: Callable[[str], str]) -> WeightRef:
        """The same reference with every file `f` replaced by `move(f)`."""
        if not self.parts:
            return replace(self, file=move(self.file))
        return replace(self, parts=tuple(p.with_files(move) for p in self.parts))

    def check(self) -> None:
        """Raises a VerifyException if the reference is malformed."""
        label = self.name or "<concatenation>"
        if any(d < 0 for d in self.shape):
            raise VerifyException(f"weight '{label}' needs a static shape, got {self.type}")
        if self.heads and (
            len(self.shape) != len(self.heads) + 2
            or any(a < 1 for a in self.heads)
            or tuple(self.shape[: len(self.heads)]) != self.heads
        ):
            raise VerifyException(
                f"weight '{label}': heads {list(self.heads)} needs the type "
                f"{'x'.join(map(str, self.heads))}xKxD, got {self.type}"
            )
        if self.rows and (
            self.heads
            or len(self.shape) != len(self.rows) + 1
            or any(a < 1 for a in self.rows)
            or tuple(self.shape[:-1]) != self.rows
        ):
            raise VerifyException(
                f"weight '{label}': rows {list(self.rows)} needs the type "
                f"{'x'.join(map(str, self.rows))}xM (and no heads), got {self.type}"
            )
        if self.rotate < 0 or self.rotate % 2:
            raise VerifyException(
                f"weight '{label}': rotate takes an even block size, got {self.rotate}"
            )
        base = self.base_shape
        if self.rotate and (not base or base[-1] % self.rotate):
            raise VerifyException(
                f"weight '{label}': rotate {self.rotate} does not divide its last "
                f"dimension ({self.type})"
            )
        if self.parts:
            self._check_concat(label)
            return
        if not self.name:
            raise VerifyException("a weight needs a non-empty tensor name")
        if not self.file:
            raise VerifyException(f"weight '{self.name}' names no file")
        if self.offset is not None and self.offset < 0:
            raise VerifyException(
                f"weight '{self.name}' has a negative offset {self.offset}"
            )

    def _check_concat(self, label: str) -> None:
        if len(self.parts) < 2:
            raise VerifyException(f"weight '{label}': a concatenation needs two parts")
        if self.file or self.offset is not None:
            raise VerifyException(f"weight '{label}': a concatenation names no file")
        shape = self.base_shape
        rank = len(shape)
        if not 0 <= self.axis < rank:
            raise VerifyException(
                f"weight '{label}': axis {self.axis} is out of range for rank {rank}"
            )
        for part in self.parts:
            part.check()
            if part.type.element_type != self.type.element_type or len(part.shape) != rank:
                raise VerifyException(
                    f"weight '{label}': part '{part.name}' ({part.type}) does not match "
                    f"{self.type} in rank and element type"
                )
            others = [d for i, d in enumerate(part.shape) if i != self.axis]
            if others != [d for i, d in enumerate(shape) if i != self.axis]:
                raise VerifyException(
                    f"weight '{label}': part '{part.name}' ({part.type}) differs from "
                    f"{self.type} off axis {self.axis}"
                )
        total = sum(p.shape[self.axis] for p in self.parts)
        if total != shape[self.axis]:
            raise VerifyException(
                f"weight '{label}': its parts give {total} along axis {self.axis}, "
                f"its type {shape[self.axis]}"
            )


def concat_refs(refs: Sequence[WeightRef], axis: int) -> WeightRef:
    """The reference to the concatenation of `refs` along `axis` (checked)."""
    shape = list(refs[0].shape)
    shape[axis] = sum(r.shape[axis] for r in refs)
    t = TensorType(refs[0].type.element_type, shape)
    ref = WeightRef(
        "+".join(r.name for r in refs), "", None, t, parts=tuple(refs), axis=axis
    )
    ref.check()
    return ref


def ref_to_dict(ref: WeightRef, with_type: bool = False) -> DictionaryAttr:
    """The reference as the dictionary a lowered weight carries (`plmr.weight`)."""
    fields: dict[str, Attribute] = {"name": StringAttr(ref.name)}
    if ref.parts:
        fields["parts"] = ArrayAttr([ref_to_dict(p, True) for p in ref.parts])
        fields["axis"] = IntegerAttr(ref.axis, i64)
    else:
        fields["file"] = StringAttr(ref.file)
    if ref.offset is not None:
        fields["offset"] = IntegerAttr(ref.offset, i64)
    if ref.rotate:
        fields["rotate"] = IntegerAttr(ref.rotate, i64)
    if ref.heads:
        fields["heads"] = ArrayAttr([IntegerAttr(a, i64) for a in ref.heads])
    if ref.rows:
        fields["rows"] = ArrayAttr([IntegerAttr(a, i64) for a in ref.rows])
    if with_type:
        fields["type"] = ref.type
    return DictionaryAttr(fields)


def _int_field(attr: DictionaryAttr, key: str) -> int | None:
    value = attr.data.get(key)
    return value.value.data if isinstance(value, IntegerAttr) else None


def _ints_field(attr: DictionaryAttr, key: str) -> tuple[int, ...] | None:
    """The integers of an array field (empty if absent); None if it is not one."""
    value = attr.data.get(key)
    if value is None:
        return ()
    if not isinstance(value, ArrayAttr):
        return None
    items = cast(ArrayAttr[Attribute], value).data
    if not all(isinstance(a, IntegerAttr) for a in items):
        return None
    return tuple(cast(IntegerAttr, a).value.data for a in items)


def ref_from_dict(attr: DictionaryAttr, t: TensorType | None = None) -> WeightRef | None:
    """The reference a dictionary of `ref_to_dict` holds; None if it is not one."""
    name = attr.data.get("name")
    if t is None:
        typed = attr.data.get("type")
        t = cast(TensorType, typed) if isinstance(typed, TensorType) else None
    if not isinstance(name, StringAttr) or t is None:
        return None
    rotate = _int_field(attr, "rotate") or 0
    heads, rows = _ints_field(attr, "heads"), _ints_field(attr, "rows")
    if heads is None or rows is None:
        return None
    parts_attr = attr.data.get("parts")
    if isinstance(parts_attr, ArrayAttr):
        parts: list[WeightRef] = []
        for p in cast(ArrayAttr[Attribute], parts_attr).data:
            part = ref_from_dict(p) if isinstance(p, DictionaryAttr) else None
            if part is None:
                return None
            parts.append(part)
        axis = _int_field(attr, "axis") or 0
        return WeightRef(name.data, "", None, t, rotate, tuple(parts), axis, heads, rows)
    file = attr.data.get("file")
    if not isinstance(file, StringAttr):
        return None
    offset = _int_field(attr, "offset")
    return WeightRef(name.data, file.data, offset, t, rotate, heads=heads, rows=rows)


def _parse_ref(parser: Parser) -> tuple[WeightRef, dict[str, Attribute]]:
    """
    `"name" in "file" [at N] [rotate B] [heads|rows [A, ...]]` or `concat AXIS (part,
    ...) [rotate B] [heads|rows [A, ...]]`.
    """
    if parser.parse_optional_keyword("concat") is not None:
        axis = parser.parse_integer(allow_boolean=False, allow_negative=False)

        def part() -> WeightRef:
            ref, attrs = _parse_ref(parser)
            parser.parse_punctuation(":")
            pos = parser.pos
            t = parser.parse_type()
            if not isinstance(t, TensorType):
                parser.raise_error("a weight's type must be a tensor type", pos, parser.pos)
            del attrs
            return replace(ref, type=cast(TensorType, t))

        parts = parser.parse_comma_separated_list(parser.Delimiter.PAREN, part)
        name = "+".join(p.name for p in parts)
        ref = WeightRef(name, "", None, _NO_TYPE, parts=tuple(parts), axis=axis)
    else:
        name = parser.parse_str_literal("the weight's tensor name")
        parser.parse_keyword("in")
        file = parser.parse_str_literal("the weights file")
        offset: int | None = None
        if parser.parse_optional_keyword("at") is not None:
            offset = parser.parse_integer(allow_boolean=False, allow_negative=False)
        ref = WeightRef(name, file, offset, _NO_TYPE)
    if parser.parse_optional_keyword("rotate") is not None:
        rotate = parser.parse_integer(allow_boolean=False, allow_negative=False)
        ref = replace(ref, rotate=rotate)
    for view in ("heads", "rows"):
        if parser.parse_optional_keyword(view) is not None:
            sizes = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE,
                lambda: parser.parse_integer(allow_boolean=False, allow_negative=False),
            )
            ref = replace(ref, **{view: tuple(sizes)})
    return ref, parser.parse_optional_attr_dict()


def _print_ref(printer: Printer, ref: WeightRef) -> None:
    if ref.parts:
        printer.print_string(f"concat {ref.axis} (")
        for i, part in enumerate(ref.parts):
            if i:
                printer.print_string(", ")
            _print_ref(printer, part)
            printer.print_string(" : ")
            printer.print_attribute(part.type)
        printer.print_string(")")
    else:
        printer.print_string_literal(ref.name)
        printer.print_string(" in ")
        printer.print_string_literal(ref.file)
        if ref.offset is not None:
            printer.print_string(f" at {ref.offset}")
    if ref.rotate:
        printer.print_string(f" rotate {ref.rotate}")
    if ref.heads:
        printer.print_string(f" heads [{', '.join(map(str, ref.heads))}]")
    if ref.rows:
        printer.print_string(f" rows [{', '.join(map(str, ref.rows))}]")


_NO_TYPE = TensorType(i64, [0])
"""A placeholder type while a reference is parsed (its type follows it)."""


@irdl_op_definition
class WeightOp(GraphOp):
    """
    A tensor whose values are the tensor `name` of the weights file `file` (at byte
    `offset` of a raw data file); its values are never written in the IR. A weight may
    also be derived from references without reading them: `rotate B` is the weight with
    rotate-half applied to each block of `B` along its last axis (a projection folded
    with RoPE's `rotate_half`), `heads [A, ...]` the `K x N` weight of a projection as one
    `K x D` weight per head (`A x ... x K x D`, `N = A·...·D`: a projection whose result
    is split into heads), `rows [A, ...]` a `N x M` weight as `A x ... x M` (a projection
    that reads heads), `concat AXIS (...)` the concatenation of references (the
    weights of merged projections). The runtime reads and combines them when it needs
    the values.

    ```mlir
    %w = graph.weight "fc.weight" in "mlp.safetensors" : tensor<16x32xf32>
    %v = graph.weight "fc.bias" in "mlp.onnx.data" at 2048 : tensor<32xf32>
    %r = graph.weight "q.weight" in "m.onnx.data" at 0 rotate 16 : tensor<64x64xf32>
    %h = graph.weight "q.weight" in "m.onnx.data" at 0 heads [4] : tensor<4x64x16xf32>
    %o = graph.weight "o.weight" in "m.onnx.data" at 0 rows [4, 16] : tensor<4x16x64xf32>
    %qk = graph.weight concat 1 ("q" in "m.onnx.data" at 0 : tensor<64x64xf32>, "k" in "m.onnx.data" at 16384 : tensor<64x32xf32>) : tensor<64x96xf32>
    ```
    """

    name = "graph.weight"

    tensor_name = prop_def(StringAttr, prop_name="name")
    file = prop_def(StringAttr)
    offset = opt_prop_def(IntegerAttr)
    rotate = opt_prop_def(IntegerAttr)
    heads = opt_prop_def(ArrayAttr[IntegerAttr])
    rows = opt_prop_def(ArrayAttr[IntegerAttr])
    parts = opt_prop_def(ArrayAttr[DictionaryAttr])
    axis = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self, name: str, file: str, result_type: TensorType, offset: int | None = None
    ):
        props: dict[str, Attribute] = {"name": StringAttr(name), "file": StringAttr(file)}
        if offset is not None:
            props["offset"] = IntegerAttr(offset, i64)
        super().__init__(result_types=[result_type], properties=props)

    @classmethod
    def of(cls, ref: WeightRef) -> WeightOp:
        """The op of a reference (plain or derived)."""
        op = cls(ref.name, ref.file, ref.type, ref.offset)
        if ref.rotate:
            op.rotate = IntegerAttr(ref.rotate, i64)
        if ref.heads:
            op.heads = ArrayAttr([IntegerAttr(a, i64) for a in ref.heads])
        if ref.rows:
            op.rows = ArrayAttr([IntegerAttr(a, i64) for a in ref.rows])
        if ref.parts:
            op.parts = ArrayAttr([ref_to_dict(p, True) for p in ref.parts])
            op.axis = IntegerAttr(ref.axis, i64)
        return op

    def ref(self) -> WeightRef | None:
        """The reference this op holds; None if its parts are malformed."""
        return weight_ref(self)

    def infer_result_types(self) -> Sequence[Attribute]:
        """The declared type, once the reference itself is checked."""
        ref = weight_ref(self)
        if ref is None:
            raise VerifyException(
                f"weight '{self.tensor_name.data}': malformed parts (each needs a name, "
                "a file or parts, and a type)"
            )
        ref.check()
        return [self.result.type]

    @classmethod
    def parse(cls, parser: Parser) -> WeightOp:
        ref, attrs = _parse_ref(parser)
        parser.parse_punctuation(":")
        pos = parser.pos
        t = parser.parse_type()
        if not isinstance(t, TensorType):
            parser.raise_error("a weight's type must be a tensor type", pos, parser.pos)
        op = cls.of(replace(ref, type=cast(TensorType, t)))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        ref = weight_ref(self)
        assert ref is not None
        printer.print_string(" ")
        _print_ref(printer, ref)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


# ---------------------------------------------------------------------------------------
# References at every level
# ---------------------------------------------------------------------------------------


def weight_ref(op: Operation) -> WeightRef | None:
    """The reference of a `graph.weight` or of a lowered weight; None for other ops."""
    if isinstance(op, WeightOp):
        t = op.result.type
        rotate = 0 if op.rotate is None else op.rotate.value.data
        offset = None if op.offset is None else op.offset.value.data
        heads = () if op.heads is None else tuple(a.value.data for a in op.heads.data)
        rows = () if op.rows is None else tuple(a.value.data for a in op.rows.data)
        if op.parts is None:
            name, file = op.tensor_name.data, op.file.data
            return WeightRef(name, file, offset, t, rotate, heads=heads, rows=rows)
        fields: dict[str, Attribute] = {
            "name": op.tensor_name,
            "parts": op.parts,
            "axis": op.axis or IntegerAttr(0, i64),
        }
        if op.rotate is not None:
            fields["rotate"] = op.rotate
        if op.heads is not None:
            fields["heads"] = op.heads
        if op.rows is not None:
            fields["rows"] = op.rows
        return ref_from_dict(DictionaryAttr(fields), t)
    if not isinstance(op, arith.ConstantOp) or not isinstance(op.value, DenseResourceAttr):
        return None
    attr = op.attributes.get(WEIGHT_ATTR)
    if not isinstance(attr, DictionaryAttr):
        return None
    return ref_from_dict(attr, cast(TensorType, op.result.type))


_HANDLE = re.compile(r"[^A-Za-z0-9_.]")


def lowered_weight(ref: WeightRef) -> arith.ConstantOp:
    """The `arith.constant` standing for a weight below the graph level."""
    handle = _HANDLE.sub("_", ref.name).strip("_.") or "weight"
    if not handle[0].isalpha():
        handle = f"w{handle}"
    op = arith.ConstantOp(DenseResourceAttr.from_params(handle, ref.type))
    op.attributes[WEIGHT_ATTR] = ref_to_dict(ref)
    return op


def weight_ops(root: Operation) -> Iterator[tuple[Operation, WeightRef]]:
    """Every weight under `root` (at any level) with its reference."""
    for op in root.walk():
        ref = weight_ref(op)
        if ref is not None:
            yield op, ref


def _move_files(op: Operation, ref: WeightRef, move: Callable[[str], str]) -> None:
    """Rewrites the files `op` (a weight at any level) names with `move`."""
    moved = ref.with_files(move)
    if isinstance(op, WeightOp):
        if moved.parts:
            op.parts = ArrayAttr([ref_to_dict(p, True) for p in moved.parts])
        else:
            op.file = StringAttr(moved.file)
        return
    op.attributes[WEIGHT_ATTR] = ref_to_dict(moved)


def weight_files(root: Operation) -> list[str]:
    """The distinct files the weights under `root` name, in order of appearance."""
    return list(
        dict.fromkeys(leaf.file for _, ref in weight_ops(root) for leaf in ref.leaves())
    )


def anchor_weights(module: ModuleOp, base: Path, moved_to: Path | None = None) -> None:
    """
    Makes the weights files of `module` absolute paths: relative ones are relative to
    `base` (the directory of the IR file they were read from). With `moved_to`, the
    files are looked up there instead: in that directory (by file name), or, if it is a
    file, that file (for a program whose weights are all in one file).
    """
    files = weight_files(module)
    if moved_to is not None and not moved_to.is_dir():
        if len(files) > 1:
            raise PlmrError(
                f"--weights {moved_to}: the program names {len(files)} weights files "
                f"({', '.join(files)}); pass the directory that holds them instead"
            )
        if not moved_to.exists():
            raise PlmrError(
                f"--weights {moved_to}: no such file or directory; pass the directory "
                "or the file that holds the program's weights"
            )
        named = files[0] if files else ""
        if named and named.endswith(".safetensors") != moved_to.name.endswith(
            ".safetensors"
        ):
            # The file's kind is told by its name: a raw data file read as safetensors
            # (or the other way round) would give wrong values.
            kind = "a safetensors file" if named.endswith(".safetensors") else "raw data"
            raise PlmrError(
                f"--weights {moved_to}: the program's weights are {kind} ({named}), "
                f"which {moved_to.name} is not named as; pass the moved {Path(named).name} "
                "or its directory"
            )

    def anchor(file: str) -> str:
        if not file:
            return file  # invalid: the verifier reports it
        if moved_to is None:
            path = Path(file) if os.path.isabs(file) else base / file
        elif moved_to.is_dir():
            path = moved_to / Path(file).name
        else:
            path = moved_to
        return str(path.resolve())

    for op, ref in list(weight_ops(module)):
        _move_files(op, ref, anchor)


def relocate_weights(module: ModuleOp, directory: Path) -> None:
    """Makes the weights files of `module` relative to `directory` (an output's)."""

    def relocate(file: str) -> str:
        if not os.path.isabs(file):
            return file
        try:
            return os.path.relpath(file, directory.resolve())
        except ValueError:  # another drive: keep it absolute
            return file

    for op, ref in list(weight_ops(module)):
        _move_files(op, ref, relocate)


__all__ = [
    "WEIGHT_ATTR",
    "WeightOp",
    "WeightRef",
    "anchor_weights",
    "concat_refs",
    "lowered_weight",
    "ref_from_dict",
    "ref_to_dict",
    "relocate_weights",
    "weight_files",
    "weight_ops",
    "weight_ref",
]
