"""An MLIR text builder for the model programs (`graph` ops, fresh SSA names)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def hexdump(a: F32) -> str:
    """A dense attribute's hex payload (little-endian f32)."""
    return "0x" + np.ascontiguousarray(a, dtype="<f4").tobytes().hex().upper()


def tensor_type(*shape: int) -> str:
    return "tensor<" + "x".join(str(s) for s in shape) + "xf32>"


class Text:
    """The lines of one function and the types of its SSA values."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.types: dict[str, str] = {}
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"%{hint}_{self.count}"

    def op(self, hint: str, text: str, rtype: str) -> str:
        name = self.fresh(hint)
        self.lines.append(f"    {name} = {text}")
        self.types[name] = rtype
        return name

    def value(
        self, key: str, shape: Sequence[int], args: list[str], data: F32 | None
    ) -> str:
        """A named input: a function argument, or a constant when `data` is given."""
        ssa = "%" + key.replace(".", "_")
        rtype = tensor_type(*shape)
        self.types[ssa] = rtype
        if data is None:
            args.append(f'{ssa}: {rtype} {{plmr.name = "{key}"}}')
        else:
            self.lines.append(
                f'    {ssa} = graph.constant dense<"{hexdump(data)}"> : {rtype}'
            )
        return ssa

    def binary(self, kind: str, a: str, b: str, rtype: str) -> str:
        return self.op(
            kind,
            f"graph.{kind} {a}, {b} : ({self.types[a]}, {self.types[b]}) -> {rtype}",
            rtype,
        )

    def matmul(self, a: str, b: str, rtype: str, transpose_b: bool = False) -> str:
        tb = " transpose_b" if transpose_b else ""
        return self.op(
            "mm",
            f"graph.matmul {a}, {b}{tb} : ({self.types[a]}, {self.types[b]}) -> {rtype}",
            rtype,
        )

    def unary(self, kind: str, a: str) -> str:
        return self.op(kind, f"graph.{kind} {a} : {self.types[a]}", self.types[a])

    def scale(self, a: str, factor: float) -> str:
        return self.op(
            "sc", f"graph.scale {a} by {factor:.9e} : {self.types[a]}", self.types[a]
        )

    def reduce(self, kind: str, a: str, rtype: str) -> str:
        return self.op(
            "red",
            f"graph.reduce {kind} {a} axes = [-1] keepdims : {self.types[a]} -> {rtype}",
            rtype,
        )

    def reduce_axes(self, kind: str, a: str, axes: Sequence[int], rtype: str) -> str:
        """A reduction over `axes`, which are dropped."""
        listed = ", ".join(str(x) for x in axes)
        return self.op(
            "red",
            f"graph.reduce {kind} {a} axes = [{listed}] : {self.types[a]} -> {rtype}",
            rtype,
        )

    def rmsnorm(self, a: str, w: str, eps: float) -> str:
        rt = self.types[a]
        return self.op(
            "norm",
            f"graph.rmsnorm {a}, {w} epsilon = {eps:.6e} : ({rt}, {self.types[w]}) -> {rt}",
            rt,
        )

    def reshape(self, a: str, shape: Sequence[int]) -> str:
        rt = tensor_type(*shape)
        if self.types[a] == rt:
            return a
        return self.op("rs", f"graph.reshape {a} : {self.types[a]} -> {rt}", rt)

    def transpose(self, a: str, perm: Sequence[int]) -> str:
        shape = _dims(self.types[a])
        rt = tensor_type(*(shape[p] for p in perm))
        text = ", ".join(str(p) for p in perm)
        return self.op(
            "tr", f"graph.transpose {a} perm = [{text}] : {self.types[a]} -> {rt}", rt
        )

    def split(self, a: str, axis: int, sizes: Sequence[int]) -> list[str]:
        shape = _dims(self.types[a])
        types: list[str] = []
        for s in sizes:
            piece = list(shape)
            piece[axis] = s
            types.append(tensor_type(*piece))
        names = [self.fresh("part") for _ in sizes]
        sz = ", ".join(str(s) for s in sizes)
        self.lines.append(
            f"    {', '.join(names)} = graph.split {a} axis = {axis} sizes = [{sz}] : "
            f"{self.types[a]} -> ({', '.join(types)})"
        )
        for n, rt in zip(names, types, strict=True):
            self.types[n] = rt
        return names

    def slices(self, a: str, axis: int, sizes: Sequence[int]) -> list[str]:
        """Consecutive pieces of `a` along `axis` (`graph.slice` each: index maps)."""
        shape = _dims(self.types[a])
        out: list[str] = []
        start = 0
        for s in sizes:
            starts = [0] * len(shape)
            ends = list(shape)
            starts[axis], ends[axis] = start, start + s
            piece = list(shape)
            piece[axis] = s
            rt = tensor_type(*piece)
            out.append(
                self.op(
                    "part",
                    f"graph.slice {a} starts = [{_ints(starts)}] ends = [{_ints(ends)}] "
                    f"steps = [{_ints([1] * len(shape))}] : {self.types[a]} -> {rt}",
                    rt,
                )
            )
            start += s
        return out

    def func(self, name: str, args: list[str], results: list[tuple[str, str, str]]) -> str:
        """The function text; `results` are (value, name, type)."""
        outs = ", ".join(f'{rt} {{plmr.name = "{n}"}}' for _, n, rt in results)
        head = f"func.func @{name}({', '.join(args)}) -> ({outs}) {{"
        ret = (
            "    func.return "
            + ", ".join(v for v, _, _ in results)
            + " : "
            + ", ".join(rt for _, _, rt in results)
        )
        return "\n".join([head, *self.lines, ret, "}", ""])


def _ints(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


def _dims(rtype: str) -> list[int]:
    return [int(d) for d in rtype.removeprefix("tensor<").split("x")[:-1]]
