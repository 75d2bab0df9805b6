"""
Weights files: the tensors a program names by reference, memory-mapped, never read whole.

Two kinds of file hold them:

- a safetensors file (`.safetensors`, Hugging Face's format: an 8-byte little-endian
  header length, a JSON header giving each tensor's dtype, shape and byte range, then the
  data), looked up by tensor name. `SafetensorsWriter` writes one tensor at a time, so
  that an importer never holds all weights at once;
- a raw data file (an ONNX model's external data, `model.onnx.data`), where a tensor is
  `nbytes` little-endian bytes at a byte offset; the offset comes with the reference.

`open_tensor` checks the reference against the file (present, name, dtype, shape, size)
and returns a read-only `np.memmap`: pages are read only when the values are used.
Every mismatch is one `PlmrError` naming the file, the tensor and what to do.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np
import numpy.typing as npt

from plmr.errors import PlmrError
from plmr.files import write_atomically

Array = npt.NDArray[Any]

SAFETENSORS_DTYPES: dict[str, np.dtype[Any]] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype(np.bool_),
}
"""The safetensors dtype names plmr reads and writes, with their numpy dtypes."""

_MAX_HEADER = 100 * 1024 * 1024
"""The largest header the safetensors format allows (100 MB)."""

_HOW_TO_FIX = (
    "re-run `plmr import` to write the program and its weights again, or pass "
    "--weights DIR_OR_FILE where the weights file is"
)


def safetensors_dtype(dtype: np.dtype[Any]) -> str:
    """The safetensors name of a numpy dtype (a PlmrError if it has none)."""
    for name, d in SAFETENSORS_DTYPES.items():
        if d.kind == dtype.kind and d.itemsize == dtype.itemsize:
            return name
    raise PlmrError(f"element type {dtype} cannot be stored in a safetensors file")


def is_safetensors(path: str | Path) -> bool:
    """Whether `path` names a safetensors file (by its extension)."""
    return str(path).endswith(".safetensors")


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lies in a safetensors file: dtype, shape, absolute byte range."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_safetensors_header(path: Path, where: str = "") -> dict[str, TensorEntry]:
    """
    The tensors of a safetensors file by name (only its header is read); errors start
    with `where` (the tensor looked up).
    """
    at = f"{where}: " if where else ""
    try:
        with path.open("rb") as f:
            size_bytes = f.read(8)
            if len(size_bytes) < 8:
                raise PlmrError(
                    f"{at}weights file {path} is not a safetensors file (shorter than its "
                    f"8-byte header size); {_HOW_TO_FIX}"
                )
            (size,) = struct.unpack("<Q", size_bytes)
            if size > _MAX_HEADER:
                raise PlmrError(
                    f"{at}weights file {path} is not a safetensors file (header size {size} "
                    f"bytes); {_HOW_TO_FIX}"
                )
            raw = f.read(size)
    except FileNotFoundError as e:
        raise PlmrError(f"{at}weights file {path} does not exist; {_HOW_TO_FIX}") from e
    except OSError as e:
        raise PlmrError(f"{at}cannot read weights file {path}: {e.strerror}") from e
    try:
        header: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PlmrError(
            f"{at}weights file {path} has a corrupt safetensors header ({e}); {_HOW_TO_FIX}"
        ) from e
    if not isinstance(header, dict):
        raise PlmrError(f"{at}weights file {path} has a corrupt safetensors header")
    base = 8 + size
    entries: dict[str, TensorEntry] = {}
    for name, info in cast(dict[str, Any], header).items():
        if name == "__metadata__":
            continue
        try:
            begin, end = (int(v) for v in info["data_offsets"])
            entry = TensorEntry(
                str(info["dtype"]),
                tuple(int(d) for d in info["shape"]),
                base + begin,
                base + end,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PlmrError(
                f"{at}weights file {path}: the header entry of tensor '{name}' is corrupt "
                f"({e}); {_HOW_TO_FIX}"
            ) from e
        entries[name] = entry
    return entries


@dataclass(frozen=True)
class TensorRequest:
    """A reference to check and map: file, tensor name, element dtype, shape, offset."""

    path: Path
    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    offset: int | None = None
    """The byte offset in a raw data file; None in a safetensors file."""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def where(self) -> str:
        return f"weight '{self.name}' ({'x'.join(map(str, self.shape)) or 'scalar'} {self.dtype.name})"


class WeightFiles:
    """Opened weights files (their headers parsed once), checking and mapping tensors."""

    def __init__(self) -> None:
        self._headers: dict[tuple[Path, int, int], dict[str, TensorEntry]] = {}

    def _stat(self, path: Path, req: TensorRequest) -> tuple[Path, int, int]:
        """The file's identity for the header cache: path, size, modification time."""
        try:
            st = path.stat()
        except FileNotFoundError as e:
            raise PlmrError(
                f"{req.where}: weights file {path} does not exist; {_HOW_TO_FIX}"
            ) from e
        except OSError as e:
            raise PlmrError(f"{req.where}: cannot read {path}: {e.strerror}") from e
        return (path, st.st_size, st.st_mtime_ns)

    def locate(self, req: TensorRequest) -> int:
        """The absolute byte offset of the tensor, after checking it against the file."""
        path = req.path
        key = self._stat(path, req)
        size = key[1]
        if req.offset is not None:
            if req.offset < 0 or req.offset + req.nbytes > size:
                raise PlmrError(
                    f"{req.where}: weights file {path} is truncated or is not the one "
                    f"the program was imported with: the weight needs bytes "
                    f"[{req.offset}, {req.offset + req.nbytes}) but the file holds "
                    f"{size}; {_HOW_TO_FIX}"
                )
            return req.offset
        header = self._headers.get(key)
        if header is None:
            header = self._headers[key] = read_safetensors_header(path, req.where)
        entry = header.get(req.name)
        if entry is None:
            raise PlmrError(
                f"{req.where}: weights file {path} has no tensor of that name (it holds "
                f"{len(header)}); {_HOW_TO_FIX}"
            )
        want = safetensors_dtype(req.dtype)
        if entry.dtype != want or entry.shape != req.shape:
            raise PlmrError(
                f"{req.where}: weights file {path} holds it as {entry.dtype} "
                f"{list(entry.shape)}, the program expects {want} {list(req.shape)}; "
                f"{_HOW_TO_FIX}"
            )
        if entry.end - entry.start != req.nbytes:
            raise PlmrError(
                f"{req.where}: weights file {path} gives it {entry.end - entry.start} "
                f"bytes, {req.nbytes} expected; {_HOW_TO_FIX}"
            )
        if entry.end > size:
            raise PlmrError(
                f"{req.where}: weights file {path} is truncated (the tensor ends at byte "
                f"{entry.end}, the file has {size}); {_HOW_TO_FIX}"
            )
        return entry.start

    def map(self, req: TensorRequest) -> Array:
        """The tensor as a read-only memory map of its bytes (checked first)."""
        start = self.locate(req)
        if req.nbytes == 0:
            return np.zeros(req.shape, dtype=req.dtype)
        return np.memmap(req.path, dtype=req.dtype, mode="r", offset=start, shape=req.shape)


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------

Source = Callable[[BinaryIO], None]
"""Writes one tensor's little-endian bytes to a file."""


@dataclass(frozen=True)
class _Pending:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    write: Source


class SafetensorsWriter:
    """
    Collects tensors (name, dtype, shape and a function that writes their bytes) and
    writes them as one safetensors file, one tensor at a time; the file appears only
    once it is complete.
    """

    def __init__(self, path: Path):
        self.path = path
        self._tensors: list[_Pending] = []
        self._names: set[str] = set()

    def __len__(self) -> int:
        return len(self._tensors)

    def add(
        self, name: str, dtype: np.dtype[Any], shape: Sequence[int], write: Source
    ) -> None:
        if name in self._names:
            raise PlmrError(f"tensor '{name}' is written twice to {self.path}")
        self._names.add(name)
        nbytes = math.prod(shape) * dtype.itemsize
        self._tensors.append(
            _Pending(name, safetensors_dtype(dtype), tuple(shape), nbytes, write)
        )

    def add_array(self, name: str, arr: Array) -> None:
        data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))

        def write(f: BinaryIO) -> None:
            f.write(data.reshape(-1).view(np.uint8).data)

        self.add(name, arr.dtype, arr.shape, write)

    def write(self) -> None:
        header: dict[str, Any] = {"__metadata__": {"format": "np"}}
        offset = 0
        for t in self._tensors:
            header[t.name] = {
                "dtype": t.dtype,
                "shape": list(t.shape),
                "data_offsets": [offset, offset + t.nbytes],
            }
            offset += t.nbytes
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * (-len(text) % 8)  # keeps the data 8-byte aligned

        def write(tmp: Path) -> None:
            with tmp.open("wb") as f:
                f.write(struct.pack("<Q", len(text)))
                f.write(text)
                for t in self._tensors:
                    start = f.tell()
                    t.write(f)
                    if f.tell() - start != t.nbytes:
                        raise PlmrError(
                            f"tensor '{t.name}' wrote {f.tell() - start} bytes to "
                            f"{self.path}, {t.nbytes} expected"
                        )

        write_atomically(self.path, write)


def relative_path(target: str, directory: Path) -> str:
    """`target` relative to `directory` (as it is if that is impossible)."""
    try:
        return os.path.relpath(target, directory.resolve())
    except ValueError:
        return target


__all__ = [
    "SAFETENSORS_DTYPES",
    "SafetensorsWriter",
    "TensorEntry",
    "TensorRequest",
    "WeightFiles",
    "is_safetensors",
    "read_safetensors_header",
    "relative_path",
    "safetensors_dtype",
]
