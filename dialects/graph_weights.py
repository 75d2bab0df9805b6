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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
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


@irdl_op_definition
class WeightOp(GraphOp):
    """
    A tensor whose values are the tensor `name` of the weights file `file` (at byte
    `offset` of a raw data file); its values are never written in the IR.

    ```mlir
    %w = graph.weight "fc.weight" in "mlp.safetensors" : tensor<16x32xf32>
    %v = graph.weight "fc.bias" in "mlp.onnx.data" at 2048 : tensor<32xf32>
    ```
    """

    name = "graph.weight"

    tensor_name = prop_def(StringAttr, prop_name="name")
    file = prop_def(StringAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self, name: str, file: str, result_type: TensorType, offset: int | None = None
    ):
        props: dict[str, Attribute] = {"name": StringAttr(name), "file": StringAttr(file)}
        if offset is not None:
            props["offset"] = IntegerAttr(offset, i64)
        super().__init__(result_types=[result_type], properties=props)

    def infer_result_types(self) -> Sequence[Attribute]:
        """The declared type, once the reference itself is checked."""
        t = self.result.type
        if not self.tensor_name.data:
            raise VerifyException("a weight needs a non-empty tensor name")
        if not self.file.data:
            raise VerifyException(f"weight '{self.tensor_name.data}' names no file")
        if any(d < 0 for d in t.get_shape()):
            raise VerifyException(
                f"weight '{self.tensor_name.data}' needs a static shape, got {t}"
            )
        if self.offset is not None and self.offset.value.data < 0:
            raise VerifyException(
                f"weight '{self.tensor_name.data}' has a negative offset "
                f"{self.offset.value.data}"
            )
        return [t]

    @classmethod
    def parse(cls, parser: Parser) -> WeightOp:
        name = parser.parse_str_literal("the weight's tensor name")
        parser.parse_keyword("in")
        file = parser.parse_str_literal("the weights file")
        offset: int | None = None
        if parser.parse_optional_keyword("at") is not None:
            offset = parser.parse_integer(allow_boolean=False, allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        t = parser.parse_type()
        if not isinstance(t, TensorType):
            parser.raise_error("a weight's type must be a tensor type", pos, parser.pos)
        op = cls(name, file, cast(TensorType, t), offset)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.tensor_name.data)
        printer.print_string(" in ")
        printer.print_string_literal(self.file.data)
        if self.offset is not None:
            printer.print_string(f" at {self.offset.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


# ---------------------------------------------------------------------------------------
# References at every level
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightRef:
    """A weight reference: tensor name, file, byte offset (raw data) and tensor type."""

    name: str
    file: str
    offset: int | None
    type: TensorType

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.type.get_shape())

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def weight_ref(op: Operation) -> WeightRef | None:
    """The reference of a `graph.weight` or of a lowered weight; None for other ops."""
    if isinstance(op, WeightOp):
        offset = None if op.offset is None else op.offset.value.data
        return WeightRef(op.tensor_name.data, op.file.data, offset, op.result.type)
    if not isinstance(op, arith.ConstantOp) or not isinstance(op.value, DenseResourceAttr):
        return None
    attr = op.attributes.get(WEIGHT_ATTR)
    if not isinstance(attr, DictionaryAttr):
        return None
    name, file = attr.data.get("name"), attr.data.get("file")
    offset = attr.data.get("offset")
    if not isinstance(name, StringAttr) or not isinstance(file, StringAttr):
        return None
    at = offset.value.data if isinstance(offset, IntegerAttr) else None
    return WeightRef(name.data, file.data, at, cast(TensorType, op.result.type))


_HANDLE = re.compile(r"[^A-Za-z0-9_.]")


def lowered_weight(ref: WeightRef) -> arith.ConstantOp:
    """The `arith.constant` standing for a weight below the graph level."""
    handle = _HANDLE.sub("_", ref.name).strip("_.") or "weight"
    if not handle[0].isalpha():
        handle = f"w{handle}"
    fields: dict[str, Attribute] = {
        "name": StringAttr(ref.name),
        "file": StringAttr(ref.file),
    }
    if ref.offset is not None:
        fields["offset"] = IntegerAttr(ref.offset, i64)
    op = arith.ConstantOp(DenseResourceAttr.from_params(handle, ref.type))
    op.attributes[WEIGHT_ATTR] = DictionaryAttr(fields)
    return op


def weight_ops(root: Operation) -> Iterator[tuple[Operation, WeightRef]]:
    """Every weight under `root` (at any level) with its reference."""
    for op in root.walk():
        ref = weight_ref(op)
        if ref is not None:
            yield op, ref


def _set_file(op: Operation, file: str) -> None:
    if isinstance(op, WeightOp):
        op.file = StringAttr(file)
        return
    attr = op.attributes[WEIGHT_ATTR]
    assert isinstance(attr, DictionaryAttr)
    op.attributes[WEIGHT_ATTR] = DictionaryAttr({**attr.data, "file": StringAttr(file)})


def weight_files(root: Operation) -> list[str]:
    """The distinct files the weights under `root` name, in order of appearance."""
    return list(dict.fromkeys(ref.file for _, ref in weight_ops(root)))


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
    for op, ref in weight_ops(module):
        if not ref.file:
            continue  # invalid: the verifier reports it
        if moved_to is None:
            path = Path(ref.file) if os.path.isabs(ref.file) else base / ref.file
        elif moved_to.is_dir():
            path = moved_to / Path(ref.file).name
        else:
            path = moved_to
        _set_file(op, str(path.resolve()))


def relocate_weights(module: ModuleOp, directory: Path) -> None:
    """Makes the weights files of `module` relative to `directory` (an output's)."""
    for op, ref in weight_ops(module):
        if not os.path.isabs(ref.file):
            continue
        try:
            rel = os.path.relpath(ref.file, directory.resolve())
        except ValueError:  # another drive: keep it absolute
            continue
        _set_file(op, rel)


__all__ = [
    "WEIGHT_ATTR",
    "WeightOp",
    "WeightRef",
    "anchor_weights",
    "lowered_weight",
    "relocate_weights",
    "weight_files",
    "weight_ops",
    "weight_ref",
]
