"""
Random valid `loop` programs: chains of nests (maps, reductions with `add`/`max`/`min`
accumulators, contractions) over small static extents, reading the function's inputs
and earlier nests' results with permuted, broadcast and constant indices.

Programs are written as MLIR text and parsed (so the parser and verifiers check them).
Bodies use only operations with exact or bounded results: `exp` reads a `tanh`, and
divisors are `|x| + 1`.

With `special`, a program also holds the values that masks and guards meet, as the graph
generator's do: some scalar constants of the bodies are `-0.0`, subnormals, `±inf`, NaN
or `finfo(f32).min`; `max`/`min` reductions may start from `∓inf`; and a constant mask
tensor (entries `0` and `-inf`, `finfo(f32).min` or `-1e9`, sometimes whole rows) may
be among the tensors the nests read.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp, f32

from plmr.dialects.context import parse_module
from plmr.dialects.float_text import float_literal
from plmr.validate.fuzz.graph_gen import MASK_VALUES, SPECIAL_VALUES

DIMS = (1, 2, 3, 4, 4, 8, 8, 6)

SCALARS = (0.5, -1.0, 2.0)
"""The scalar constants of the bodies."""

SPECIAL_SCALARS = (*SPECIAL_VALUES, float(np.finfo(np.float32).min))
"""The scalar constants a `special` program's bodies may also hold."""


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]


@dataclass
class _Body:
    rng: random.Random
    lines: list[str] = field(default_factory=list[str])
    counter: int = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"%{stem}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append(line)


def _ty(shape: tuple[int, ...]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}f32>"


@dataclass
class LoopGenerator:
    rng: random.Random
    max_nests: int = 4
    special: bool = False
    """Special values in constants, reduction starts and a mask (see the docstring)."""

    def __post_init__(self) -> None:
        self.tensors: list[_Tensor] = []
        self.args: list[_Tensor] = []
        self.lines: list[str] = []
        self.n = 0

    def _fresh(self, stem: str) -> str:
        self.n += 1
        return f"%{stem}{self.n}"

    def _read(self, body: _Body, t: _Tensor, loops: list[tuple[str, int]]) -> str | None:
        """A read of `t` with each dim indexed by a loop of its extent or a constant."""
        idx: list[str] = []
        for d in t.shape:
            fits = [v for v, e in loops if e == d]
            if fits and self.rng.random() < 0.9:
                idx.append(self.rng.choice(fits))
            else:
                c = body.fresh("c")
                body.emit(f"{c} = arith.constant {self.rng.randrange(d)} : index")
                idx.append(c)
        if t.shape and all(i.startswith("%c") for i in idx) and self.rng.random() < 0.7:
            return None
        v = body.fresh("r")
        body.emit(f"{v} = loop.read {t.name}[{', '.join(idx)}] : {_ty(t.shape)}")
        return v

    def _value(self, body: _Body, loops: list[tuple[str, int]], depth: int = 0) -> str:
        """A scalar expression over reads."""
        if depth >= 2 or self.rng.random() < 0.35:
            if self.special and self.rng.random() < 0.2:
                c = body.fresh("k")
                value = float_literal(self.rng.choice(SPECIAL_SCALARS), f32)
                body.emit(f"{c} = arith.constant {value} : f32")
                return c
            choices = list(self.tensors)
            self.rng.shuffle(choices)
            for t in choices:
                v = self._read(body, t, loops)
                if v is not None:
                    return v
            c = body.fresh("k")
            value = self.rng.choice(SCALARS)
            if self.special and self.rng.random() < 0.4:
                value = self.rng.choice(SPECIAL_SCALARS)
            body.emit(f"{c} = arith.constant {float_literal(value, f32)} : f32")
            return c
        a = self._value(body, loops, depth + 1)
        kind = self.rng.choice(
            ("addf", "subf", "mulf", "maximumf", "minimumf", "negf", "exp", "divf", "tanh")
        )
        out = body.fresh("v")
        if kind in ("negf", "tanh"):
            op = "arith.negf" if kind == "negf" else "math.tanh"
            body.emit(f"{out} = {op} {a} : f32")
        elif kind == "exp":
            t = body.fresh("t")
            body.emit(f"{t} = math.tanh {a} : f32")
            body.emit(f"{out} = math.exp {t} : f32")
        elif kind == "divf":
            b = self._value(body, loops, depth + 1)
            ab, one, den = body.fresh("a"), body.fresh("one"), body.fresh("d")
            body.emit(f"{ab} = math.absf {b} : f32")
            body.emit(f"{one} = arith.constant 1.0 : f32")
            body.emit(f"{den} = arith.addf {ab}, {one} : f32")
            body.emit(f"{out} = arith.divf {a}, {den} : f32")
        else:
            b = self._value(body, loops, depth + 1)
            body.emit(f"{out} = arith.{kind} {a}, {b} : f32")
        return out

    def _nest(self) -> None:
        rank = self.rng.choice((1, 2, 2, 3))
        known = sorted({d for t in self.tensors for d in t.shape})
        extents = [
            self.rng.choice(known)
            if known and self.rng.random() < 0.8
            else self.rng.choice(DIMS)
            for _ in range(rank)
        ]
        if math.prod(extents) > 256:
            extents = extents[:1]
        reduce = self.rng.random() < 0.5
        red_extent = self.rng.choice(known or [4]) if reduce else 0
        names = [f"%i{j}" for j in range(len(extents))]
        loops = list(zip(names, extents, strict=True))
        body = _Body(self.rng)
        if reduce:
            loops_all = [*loops, ("%k", red_extent)]
        else:
            loops_all = loops
        value = self._value(body, loops_all)
        out = self._fresh("n")
        shape = tuple(extents)
        iters = ["parallel"] * len(extents)
        bounds = list(extents)
        ivs = list(names)
        if reduce:
            kind = self.rng.choice(("addf", "maximumf", "minimumf"))
            init = {
                "addf": "0.0",
                "maximumf": "-3.40282347e+38",
                "minimumf": "3.40282347e+38",
            }[kind]
            if self.special and kind != "addf" and self.rng.random() < 0.5:
                init = float_literal(-math.inf if kind == "maximumf" else math.inf, f32)
            c0 = self._fresh("z")
            self.lines.append(f"    {c0} = arith.constant {init} : f32")
            acc = body.fresh("acc")
            new = body.fresh("s")
            body.emit(f"{new} = arith.{kind} %acc, {value} : f32")
            value = new
            del acc
            iters.append("reduction")
            bounds.append(red_extent)
            ivs.append("%k")
            head = (
                f"    {out} = loop.nest ({', '.join(ivs)}) to ({', '.join(map(str, bounds))}) "
                f"[{', '.join(iters)}] init(%acc = {c0} : f32) -> {_ty(shape)} {{"
            )
        else:
            head = (
                f"    {out} = loop.nest ({', '.join(ivs)}) to ({', '.join(map(str, bounds))}) "
                f"[{', '.join(iters)}] -> {_ty(shape)} {{"
            )
        self.lines.append(head)
        self.lines.extend(f"      {line}" for line in body.lines)
        self.lines.append(f"      loop.yield {value} : f32")
        self.lines.append("    }")
        self.tensors.append(_Tensor(out, shape))

    def _mask(self) -> None:
        """A constant additive mask: zeros and one masked value, sometimes whole rows."""
        shape = tuple(self.rng.choice(DIMS) for _ in range(self.rng.choice((1, 2, 2))))
        masked = self.rng.choice(MASK_VALUES)
        data = np.where(
            np.asarray(
                [self.rng.random() < 0.3 for _ in range(math.prod(shape))], dtype=bool
            ).reshape(shape),
            np.float32(masked),
            np.float32(0.0),
        )
        if len(shape) == 2 and self.rng.random() < 0.5:
            data[self.rng.randrange(shape[0])] = masked
        name = self._fresh("mask")
        self.lines.append(
            f"    {name} = arith.constant dense<{_nested(data)}> : {_ty(shape)}"
        )
        self.tensors.append(_Tensor(name, shape))

    def generate(self) -> ModuleOp:
        for j in range(self.rng.randint(1, 3)):
            shape = tuple(
                self.rng.choice(DIMS) for _ in range(self.rng.choice((1, 2, 2, 3)))
            )
            t = _Tensor(f"%x{j}", shape)
            self.args.append(t)
            self.tensors.append(t)
        if self.special and self.rng.random() < 0.5:
            self._mask()
        for _ in range(self.rng.randint(1, self.max_nests)):
            self._nest()
        results = [
            t for t in self.tensors if t not in self.args and not t.name.startswith("%mask")
        ]
        used = {t.name for t in results for line in self.lines if f"{t.name}[" in line}
        outs = [t for t in results if t.name not in used][-3:] or results[-1:]
        args = ", ".join(f"{t.name}: {_ty(t.shape)}" for t in self.args)
        rets = ", ".join(_ty(t.shape) for t in outs)
        text = "\n".join(
            [
                "builtin.module {",
                f"  func.func @main({args}) -> ({rets}) {{",
                *self.lines,
                f"    func.return {', '.join(t.name for t in outs)} : {rets}",
                "  }",
                "}",
            ]
        )
        return parse_module(text, "<loop fuzz>")


def _nested(data: np.ndarray) -> str:
    """A dense literal of `data` (nested lists), every float exact."""
    if data.ndim == 0:
        return float_literal(float(data), f32)
    return "[" + ", ".join(_nested(row) for row in data) + "]"


def generate_loop(seed: int, max_nests: int = 4, special: bool = False) -> ModuleOp:
    """A random valid loop-level module with one function `@main`, from `seed`."""
    return LoopGenerator(
        random.Random(seed), max_nests=max_nests, special=special
    ).generate()


def generate_tile(seed: int, max_nests: int = 4, special: bool = False) -> ModuleOp:
    """
    A random tile-level module: a random loop program blocked by `convert-loop-to-tile`
    with random block sizes (shrunk to divisors: `fit`), so every nest is tiled.
    """
    from plmr.dialects.context import make_context
    from plmr.lowering.loop_to_tile import ConvertLoopToTilePass

    rng = random.Random(seed)
    module = generate_loop(rng.getrandbits(32), max_nests, special)
    sizes = (rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4, 8)))
    ConvertLoopToTilePass(tile_sizes=sizes, fit=True).apply(make_context(), module)
    return module


__all__ = ["LoopGenerator", "generate_loop", "generate_tile"]
