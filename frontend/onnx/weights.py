"""
Weights by reference at import: which initializers stay out of the IR text
(`WeightsOptions`), where their bytes are (`LazyTensor`: the model's external data, read in
place, or its protobuf) and the safetensors file the others are written to (`WeightSink`).
Nothing here reads a weight's values unless a handler asks for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import onnx
from onnx import numpy_helper
from xdsl.ir import Attribute

from plmr.errors import PlmrError
from plmr.weight_io import SafetensorsWriter

Array = npt.NDArray[Any]


def to_array(tensor: onnx.TensorProto, what: str, base_dir: str = "") -> Array:
    """
    The value of an ONNX tensor as a numpy array, or a PlmrError naming `what`; external
    data is read from `base_dir` (the model's directory).
    """
    try:
        return np.asarray(numpy_helper.to_array(tensor, base_dir))
    except (ValueError, TypeError, OSError, KeyError, onnx.checker.ValidationError) as e:
        if base_dir and tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise PlmrError(
                f"cannot load the external data of {what} from {base_dir}: {e}; keep "
                "the data files next to the model, as onnx.save wrote them"
            ) from e
        raise PlmrError(
            f"cannot read the value of {what}: {e}; if it is stored as external data, "
            "keep the data file next to the model, as onnx.save wrote it (and import "
            "it with import_onnx_file)"
        ) from e


# ---------------------------------------------------------------------------------------
# Weights by reference
# ---------------------------------------------------------------------------------------

DEFAULT_INLINE_LIMIT = 1024
"""Initializers of at most this many bytes stay inline in the IR (`graph.constant`)."""


@dataclass(frozen=True)
class WeightsOptions:
    """
    Which constants the importer keeps out of the IR text and where their bytes go.

    Initializers larger than `inline_limit` bytes become `graph.weight` references:
    those stored as external data are referenced in place (file, offset); the others,
    and constants folded at import that are as large, are written to the safetensors
    file `out` (kept inline if `out` is None).
    """

    inline_limit: int = DEFAULT_INLINE_LIMIT
    out: Path | None = None


@dataclass
class LazyTensor:
    """An initializer kept out of the IR: its type and where its bytes are."""

    proto: onnx.TensorProto
    dtype: np.dtype[Any]
    mlir: Attribute
    shape: tuple[int, ...]
    base_dir: str
    external: tuple[Path, int] | None
    """The data file (absolute) and byte offset, for external data."""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def load(self) -> Array:
        """The values, read now (a pass that must see them: small uses only)."""
        return to_array(self.proto, f"initializer '{self.proto.name}'", self.base_dir)

    def write(self, f: BinaryIO) -> None:
        """Writes the little-endian bytes to `f` (raw data as stored, no conversion)."""
        if self.proto.HasField("raw_data"):
            f.write(self.proto.raw_data)
            return
        data = np.ascontiguousarray(self.load(), dtype=self.dtype)
        f.write(data.reshape(-1).view(np.uint8).data)


def external_location(
    init: onnx.TensorProto, base_dir: str, nbytes: int
) -> tuple[Path, int]:
    """The data file and offset of an initializer stored as external data."""
    info = {e.key: e.value for e in init.external_data}
    location = info.get("location", "")
    where = f"initializer '{init.name}'"
    if not location:
        raise PlmrError(
            f"{where} is stored as external data but names no file; fix the model"
        )
    path = Path(base_dir, location).resolve()
    try:
        offset = int(info.get("offset", "0"))
        length = int(info.get("length", str(nbytes)))
    except ValueError as e:
        raise PlmrError(f"{where}: bad external data offset or length ({e})") from e
    if length != nbytes:
        raise PlmrError(
            f"{where}: its external data is {length} bytes, its type needs {nbytes}; "
            "fix the model"
        )
    try:
        size = path.stat().st_size
    except OSError as e:
        raise PlmrError(
            f"cannot load the external data of {where}: cannot read {path}: "
            f"{e.strerror}; keep the data files next to the model, as onnx.save wrote "
            "them"
        ) from e
    if offset < 0 or offset + nbytes > size:
        raise PlmrError(
            f"{where}: its external data (bytes [{offset}, {offset + nbytes})) lies "
            f"beyond the end of {path} ({size} bytes): the data file is truncated or "
            "belongs to another model"
        )
    return path, offset


@dataclass
class WeightSink:
    """What the importer keeps out of the IR: its options and the file it writes."""

    options: WeightsOptions
    writer: SafetensorsWriter | None = None
    names: set[str] = field(default_factory=set[str])

    def __post_init__(self) -> None:
        if self.options.out is not None:
            self.writer = SafetensorsWriter(self.options.out)

    def out_of_line(self, nbytes: int, size: int) -> bool:
        return size > 1 and nbytes > self.options.inline_limit

    def unique(self, name: str) -> str:
        """A tensor name for the written file not used before (the ONNX name if free)."""
        candidate, n = name or "constant", 1
        while candidate in self.names:
            n += 1
            candidate = f"{name}#{n}"
        self.names.add(candidate)
        return candidate
