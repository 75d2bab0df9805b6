"""
Step 1–3 of TASO's substitution generator: the inputs and op templates, and the
depth-first enumeration of graphs grouped by fingerprint into candidate pairs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from plmr.passes.taso.ops import (
    COMMUTATIVE,
    IDENTITY,
    Params,
    Shape,
    conv_params,
    param_int,
    pool_params,
)
from plmr.passes.taso.semantics import FingerprintOps

Array = npt.NDArray[Any]


MAX_SIZE = 512
"""Largest tensor (elements) the enumeration creates (TASO's MAX_SIZE)."""


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: Shape
    weight: bool


INPUTS_2D = (
    InputSpec("x1", (2, 4), False),
    InputSpec("x2", (2, 4), False),
    InputSpec("x3", (2, 4), False),
    InputSpec("w1", (4, 4), True),
    InputSpec("w2", (4, 4), True),
    InputSpec("w3", (4, 4), True),
)


INPUTS_4D = (
    InputSpec("i1", (2, 4, 5, 5), False),
    InputSpec("i2", (2, 4, 5, 5), False),
    InputSpec("k1", (4, 4, 3, 3), True),
    InputSpec("k2", (4, 4, 3, 3), True),
    InputSpec("k3", (4, 4, 1, 1), True),
    InputSpec("k4", (4, 4, 1, 1), True),
)


@dataclass(frozen=True)
class Template:
    """An op the enumeration can add: a key with its arity and number of results."""

    tid: int
    kind: str
    params: Params
    arity: int
    results: int = 1
    const_shape: Shape = ()


def make_templates(kinds: Sequence[str]) -> list[Template]:
    out: list[Template] = []

    def add(kind: str, params: Params, arity: int, results: int = 1, shape: Shape = ()):
        if kind in kinds:
            out.append(Template(len(out), kind, params, arity, results, shape))

    add("matmul", (False, False), 2)
    add("add", (), 2)
    add("mul", (), 2)
    add("scale", (2.0,), 1)
    add("relu", (), 1)
    add("transpose", ((1, 0),), 1)
    add("concat", (0,), 2)
    add("concat", (1,), 2)
    add("split", (0,), 1, 2)
    add("split", (1,), 1, 2)
    add("conv2d", conv_params((3, 3)), 2)
    add("conv2d", conv_params((1, 1)), 2)
    add("pool", pool_params("avg"), 1)
    add("pool", pool_params("max"), 1)
    add("const", (IDENTITY, (4, 4)), 0, 1, (4, 4))
    if "conv2d" in kinds:
        add("const", (IDENTITY, (4, 4, 3, 3)), 0, 1, (4, 4, 3, 3))
    return out


def _vhash(a: Array) -> int:
    return hash((a.shape, a.tobytes()))


Bounds = tuple[int | None, ...]


def propagate_bounds(
    kind: str,
    params: Params,
    bounds: Sequence[Bounds],
    shapes: Sequence[Shape],
    out_ranks: Sequence[int],
) -> list[Bounds]:
    """
    Concat boundaries of an op's results (TASO's SplitInfo): `split` may only cut a tensor
    where a concat joined it, on an axis where that boundary survived.
    """
    if kind == "concat":
        axis = param_int(kind, params, 0, "axis")
        merged = [x if x == y else None for x, y in zip(bounds[0], bounds[1], strict=True)]
        merged[axis] = shapes[0][axis]
        return [tuple(merged)]
    if kind in COMMUTATIVE:
        return [tuple(x if x == y else None for x, y in zip(*bounds, strict=True))]
    if kind in ("scale", "relu", "pool"):
        return [bounds[0]]
    if kind == "transpose":
        return [(bounds[0][1], bounds[0][0])]
    if kind == "matmul":
        return [(bounds[0][0], bounds[1][1])]
    if kind == "conv2d":
        return [(bounds[0][0], bounds[1][0], None, None)]
    if kind == "split":
        axis = param_int(kind, params, 0, "axis")
        b = list(bounds[0])
        b[axis] = None
        return [tuple(b), tuple(b)]
    return [(None,) * r for r in out_ranks]


def split_params(axis: int, bound: int, size: int) -> Params:
    """The key parameters of a split at a concat boundary."""
    return (axis, (bound, size - bound))


GraphOps = tuple[tuple[int, tuple[int, ...]], ...]
"""A graph: ops as (template id, operand tensor indices); inputs come first."""


@dataclass
class _Tensor:
    value: Array
    vhash: int
    term: int
    weight: bool
    bounds: Bounds
    uses: int = 0


@dataclass
class EnumerationResult:
    graphs: int = 0
    groups: int = 0
    candidates: list[tuple[GraphOps, GraphOps]] = field(
        default_factory=lambda: list[tuple[GraphOps, GraphOps]]()
    )
    seconds: float = 0.0


def inputs_for(kinds: Sequence[str]) -> tuple[InputSpec, ...]:
    """The enumeration's inputs: 4-D tensors and kernels only when 4-D ops are chosen."""
    return INPUTS_2D + (INPUTS_4D if "conv2d" in kinds or "pool" in kinds else ())


class Enumerator:
    """Depth-first enumeration of graphs with fingerprint grouping (TASO's `dfs`)."""

    def __init__(
        self,
        kinds: Sequence[str],
        max_ops: int,
        seed: int = 0,
        inputs: Sequence[InputSpec] | None = None,
    ):
        self.templates = make_templates(kinds)
        self.max_ops = max_ops
        self.inputs = inputs_for(kinds) if inputs is None else tuple(inputs)
        rng = np.random.default_rng(seed)
        self.ops_sem = FingerprintOps(np.int64(rng.integers(-(2**62), 2**62) | 1))
        self.input_values = [
            rng.integers(-(2**62), 2**62, size=s.shape, dtype=np.int64) for s in self.inputs
        ]
        self.terms: dict[tuple[Any, ...], int] = {}
        self.table: dict[int, GraphOps] = {}
        self.result = EnumerationResult()
        self.tensors: list[_Tensor] = []
        self.ops: list[tuple[int, tuple[int, ...]]] = []
        self.op_keys: set[tuple[int, tuple[int, ...]]] = set()
        self.vhashes: set[int] = set()

    def _term(self, key: tuple[Any, ...]) -> int:
        found = self.terms.get(key)
        if found is None:
            found = len(self.terms)
            self.terms[key] = found
        return found

    def run(self) -> EnumerationResult:
        start = time.perf_counter()
        for i, (spec, value) in enumerate(zip(self.inputs, self.input_values, strict=True)):
            t = _Tensor(
                value,
                _vhash(value),
                self._term(("in", i)),
                spec.weight,
                (None,) * value.ndim,
            )
            self.tensors.append(t)
            self.vhashes.add(t.vhash)
        self._dfs(0, None, ())
        self.result.groups = len({first for first, _ in self.result.candidates})
        self.result.seconds = time.perf_counter() - start
        return self.result

    def _operands(self, t: Template) -> Iterator[tuple[int, ...]]:
        """Operand tuples of the current tensors that `t` accepts (shapes, roles)."""
        ts = self.tensors
        n = len(ts)
        k = t.kind
        if t.arity == 0:
            yield ()
            return
        if t.arity == 1:
            for j in range(n):
                x = ts[j].value
                if (k == "transpose" and x.ndim != 2) or (k == "pool" and x.ndim != 4):
                    continue
                if k == "split":
                    axis = param_int(t.kind, t.params, 0, "axis")
                    if axis >= x.ndim or ts[j].bounds[axis] is None:
                        continue
                yield (j,)
            return
        kernel = (3, 3) if t.kind == "conv2d" and t.params[1] == (1, 1, 1, 1) else (1, 1)
        for j in range(n):
            a = ts[j].value
            for m in range(j + 1 if k in COMMUTATIVE else 0, n):
                if m == j and k != "matmul":
                    continue
                b = ts[m].value
                if k == "matmul":
                    ok = a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]
                elif k in COMMUTATIVE:
                    ok = a.shape == b.shape
                elif k == "concat":
                    axis = param_int(t.kind, t.params, 0, "axis")
                    ok = (
                        a.ndim == b.ndim
                        and axis < a.ndim
                        and a.shape[:axis] == b.shape[:axis]
                        and a.shape[axis + 1 :] == b.shape[axis + 1 :]
                    )
                else:  # conv2d: the kernel must come from weights
                    ok = (
                        a.ndim == 4
                        and b.ndim == 4
                        and ts[m].weight
                        and a.shape[1] == b.shape[1]
                        and b.shape[2:] == kernel
                    )
                if ok:
                    yield (j, m)

    def _register(self) -> None:
        produced = range(len(self.inputs), len(self.tensors))
        outs = sorted(self.tensors[i].vhash for i in produced if self.tensors[i].uses == 0)
        key = hash(tuple(outs))
        self.result.graphs += 1
        graph_ops = tuple(self.ops)
        first = self.table.get(key)
        if first is None:
            self.table[key] = graph_ops
        else:
            self.result.candidates.append((first, graph_ops))

    def _dfs(
        self,
        depth: int,
        last: tuple[int, tuple[int, ...]] | None,
        last_outputs: tuple[int, ...],
    ) -> None:
        if depth > 0:
            self._register()
        if depth >= self.max_ops:
            return
        ts = self.tensors
        for t in self.templates:
            if last is not None and t.tid < last[0] and t.arity == 0:
                continue
            for operands in self._operands(t):
                key = (t.tid, tuple(ts[j].term for j in operands))
                # Independent ops are added in increasing key order only.
                if (
                    last is not None
                    and key <= last
                    and not any(j in last_outputs for j in operands)
                ):
                    continue
                if key in self.op_keys:
                    continue
                args = [ts[j].value for j in operands]
                params = t.params
                if t.kind == "split":
                    axis = param_int(t.kind, t.params, 0, "axis")
                    bound = ts[operands[0]].bounds[axis]
                    assert bound is not None
                    params = split_params(axis, bound, args[0].shape[axis])
                outs = self.ops_sem.apply(t.kind, params, args)
                if any(o.size > MAX_SIZE for o in outs):
                    continue
                hashes = [_vhash(o) for o in outs]
                if any(h in self.vhashes for h in hashes) or len(set(hashes)) < len(hashes):
                    continue  # a tensor the graph already has: redundant
                bounds = propagate_bounds(
                    t.kind,
                    params,
                    [ts[j].bounds for j in operands],
                    [a.shape for a in args],
                    [o.ndim for o in outs],
                )
                weight = all(ts[j].weight for j in operands)
                first_new = len(ts)
                for r, (o, h, b) in enumerate(zip(outs, hashes, bounds, strict=True)):
                    ts.append(_Tensor(o, h, self._term(("op", key, r)), weight, b))
                    self.vhashes.add(h)
                for j in operands:
                    ts[j].uses += 1
                self.ops.append((t.tid, operands))
                self.op_keys.add(key)
                self._dfs(depth + 1, key, tuple(range(first_new, len(ts))))
                self.op_keys.discard(key)
                self.ops.pop()
                for j in operands:
                    ts[j].uses -= 1
                for h in hashes:
                    self.vhashes.discard(h)
                del ts[first_new:]
