"""Tests of the `tile` dialect: builders, verifiers, docstrings, the op list."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    Builtin,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerType,
    ModuleOp,
    TensorType,
    UnitAttr,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.dialects.func import Func, FuncOp
from xdsl.dialects.math import Math
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.test_value import create_ssa_value

from plmr.dialects import tile, tile_compute, tile_layout, tile_memory, tile_regions
from plmr.dialects.tile import (
    BINARY_KINDS,
    UNARY_KINDS,
    BroadcastOp,
    CastOp,
    DotOp,
    FillOp,
    ForOp,
    LoadOp,
    LoopKind,
    LoopKindAttr,
    MapOp,
    ReduceKind,
    ReduceKindAttr,
    ReduceOp,
    ReshapeOp,
    StoreOp,
    Tile,
    TileOp,
    TransposeOp,
    YieldOp,
    nbytes,
)
from plmr.runtime.reference import ReferenceEvaluator
from plmr.runtime.tile_ops import EVAL_IMPLS
from plmr.values import tensor_dtype

from .conftest import raise_lines

INVALID_MLIR = (
    Path(__file__).parents[1] / "filecheck" / "dialects" / "tile" / "invalid.mlir"
)


def tensor(shape: Sequence[int], elt: Attribute = f32) -> SSAValue:
    """A fresh SSA value of type `tensor<shape x elt>`."""
    return create_ssa_value(TensorType(elt, shape))


def index() -> SSAValue:
    return create_ssa_value(IndexType())


def make_context() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Math, Tile):
        ctx.load_dialect(dialect)
    return ctx


def parse(source: str) -> ModuleOp:
    module = Parser(make_context(), source).parse_module()
    module.verify()
    return module


def raises(message: str) -> Any:
    """`pytest.raises(VerifyException)` matching the whole message literally."""
    return pytest.raises(VerifyException, match=f"^{re.escape(message)}$")


# ---------------------------------------------------------------------------------------
# The dialect
# ---------------------------------------------------------------------------------------

ALL_OPS = {
    "tile.fill",
    "tile.load",
    "tile.store",
    "tile.dot",
    "tile.reduce",
    "tile.map",
    "tile.yield",
    "tile.broadcast",
    "tile.cast",
    "tile.transpose",
    "tile.reshape",
    "tile.select",
    "tile.for",
    "tile.lookup",
}


def test_dialect_lists_every_op():
    names = [op.name for op in Tile.operations]
    assert len(names) == len(set(names)) == 14
    assert set(names) == ALL_OPS
    assert Tile.name == "tile"


def test_dialect_lists_every_op_class_of_the_module():
    defined = {
        cls
        for cls in vars(tile).values()
        if inspect.isclass(cls)
        and issubclass(cls, Operation)
        and isinstance(cls.__dict__.get("name"), str)
    }
    assert defined == set(Tile.operations)


def test_dialect_lists_its_attributes():
    assert set(Tile.attributes) == {LoopKindAttr, ReduceKindAttr}
    assert LoopKindAttr.name == "tile.loop_kind"
    assert ReduceKindAttr.name == "tile.reduce_kind"
    assert [k.value for k in LoopKind] == ["parallel", "reduction"]
    assert [k.value for k in ReduceKind] == ["sum", "max", "min"]


def test_every_op_but_yield_has_reference_semantics_and_a_cost():
    for op in Tile.operations:
        if op is YieldOp:
            assert op not in EVAL_IMPLS  # the evaluator handles terminators itself
            assert not issubclass(op, TileOp)
            continue
        assert op in EVAL_IMPLS, op.name
        assert issubclass(op, TileOp), op.name


def test_pure_ops():
    pure = {op.name for op in Tile.operations if op.has_trait(tile.Pure)}
    assert pure == ALL_OPS - {"tile.for"}
    assert ForOp.has_trait(tile.RecursiveMemoryEffect)
    assert MapOp.has_trait(tile.RecursiveMemoryEffect)
    assert YieldOp.has_trait(tile.IsTerminator)


def test_map_kinds():
    assert len(UNARY_KINDS) == len(set(UNARY_KINDS)) == 16
    assert len(BINARY_KINDS) == len(set(BINARY_KINDS)) == 6
    assert not set(UNARY_KINDS) & set(BINARY_KINDS)


# ---------------------------------------------------------------------------------------
# Docstrings: every op documents itself with an ```mlir example that parses, verifies,
# round-trips and runs under the reference semantics.
# ---------------------------------------------------------------------------------------


def _split_top_level(text: str) -> list[str]:
    """Splits at commas outside <>, () and []."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]" and not (ch == ">" and text[i - 1] == "-"):
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _free_value_types(lines: Sequence[str], free: set[str]) -> dict[str, str]:
    """The types of the values an example uses without defining them."""
    types: dict[str, str] = {}
    for line in lines:
        for name in re.findall(r"\[([^\]]*)\]", line):
            if "tile.lookup" in line:
                break  # its brackets hold the ids tensor, typed by the signature
            for v in re.findall(r"%\w+", name):
                types.setdefault(v, "index")
        inits = re.search(r"iter_args\((.*?)\) -> \((.*?)\)", line)
        if inits:
            values = [p.split("=")[1].strip() for p in _split_top_level(inits.group(1))]
            for v, t in zip(values, _split_top_level(inits.group(2)), strict=True):
                types.setdefault(v, t)
            continue
        if " : " not in line:
            continue
        body, signature = line.rsplit(" : ", 1)
        body = body.split("=", 1)[-1]
        if "tile.lookup" not in body:
            body = re.sub(r"\[[^\]]*\]", "", body)
        operands = re.findall(r"%\w+", body)
        if "tile.select" in body:
            # `tile.select %cond, %a, %b : T`: the condition is an i1.
            types.setdefault(operands[0], "i1")
            for v in operands[1:]:
                types.setdefault(v, signature.strip())
            continue
        if signature.startswith("("):
            operand_types = _split_top_level(signature[1 : signature.index(") ->")])
        else:
            operand_types = [t.strip() for t in signature.split(" -> ")]
        for v, t in zip(operands, operand_types, strict=False):
            types.setdefault(v, t)
    return {v: types[v] for v in sorted(free, key=lambda v: "".join(lines).index(v))}


def docstring_example(op: type[Operation]) -> str:
    """The ```mlir example of an op's docstring, as a function of its free values."""
    doc = inspect.getdoc(op) or ""
    blocks = re.findall(r"```mlir\n(.*?)```", doc, re.DOTALL)
    assert len(blocks) == 1, f"{op.name} needs exactly one ```mlir example"
    lines = [line.rstrip() for line in blocks[0].strip().splitlines()]
    assert op.name in blocks[0]
    if op is YieldOp:
        # A terminator: give it a loop to end.
        (line,) = lines
        t = line.split(" : ")[1]
        lines = [
            f"%r = tile.for %it = 0 to 1 step 1 iter_args(%acc = %init) -> ({t}) reduction {{",
            f"  {line}",
            "}",
        ]
    text = "\n".join(lines)
    used = set(re.findall(r"%\w+", text))
    defined = set(re.findall(r"(%\w+)(?::\d+)? =", text))
    defined |= set(re.findall(r"(%\w+): ", text))  # block arguments
    free = used - defined
    args = _free_value_types(lines, free)
    assert set(args) == free, (op.name, free, args)
    signature = ", ".join(f"{n}: {t}" for n, t in args.items())
    body = "\n".join(f"  {line}" for line in lines)
    return f"func.func @doc({signature}) {{\n{body}\n  func.return\n}}"


def _sample(t: Attribute, rng: np.random.Generator) -> Any:
    if isinstance(t, IndexType):
        return np.int64(0)
    if t == IntegerType(1):
        return np.bool_(True)
    shape = tile.static_shape(t, "value")
    dtype = tensor_dtype(t)
    return (np.abs(rng.standard_normal(shape)) + 0.5).astype(dtype)


@pytest.mark.parametrize("op", list(Tile.operations), ids=lambda op: op.name)
def test_docstring_example_parses_verifies_and_runs(op: type[Operation]):
    source = docstring_example(op)
    module = parse(source)
    assert any(isinstance(o, op) for o in module.walk()), source
    # The custom syntax round-trips.
    printed = str(module)
    reparsed = parse(printed)
    assert str(reparsed) == printed
    assert reparsed.is_structurally_equivalent(module)
    # The reference semantics run it (with offsets 0) and produce the declared types.
    fn = next(o for o in module.ops if isinstance(o, FuncOp))
    rng = np.random.default_rng(0)
    args = [_sample(t, rng) for t in fn.function_type.inputs.data]
    ev = ReferenceEvaluator(module)
    assert ev.run(ev.function("doc"), args) == []


@pytest.mark.parametrize("op", list(Tile.operations), ids=lambda op: op.name)
def test_docstring_has_a_summary(op: type[Operation]):
    doc = inspect.getdoc(op)
    assert doc is not None
    assert len(doc.split("\n\n")[0]) > 10


# ---------------------------------------------------------------------------------------
# Builders infer result types
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("elt", [f32, f16, i32])
def test_fill_builder(elt: Attribute):
    op = FillOp(2, TensorType(elt, (16, 8)))
    assert op.result.type == TensorType(elt, (16, 8))
    assert op.value == FloatAttr(2.0, Float64Type())
    op.verify()
    assert FillOp(-math.inf, TensorType(f32, ())).value.value.data == -math.inf


@pytest.mark.parametrize(
    "source, block, elt",
    [((64, 64), (16, 16), f32), ((128,), (32,), f16), ((4, 32, 32), (1, 8, 32), i32)],
)
def test_load_builder(source: tuple[int, ...], block: tuple[int, ...], elt: Attribute):
    src = tensor(source, elt)
    offsets = [index() for _ in source]
    op = LoadOp(src, offsets, block)
    assert op.result.type == TensorType(elt, block)
    assert op.source is src
    assert list(op.offsets) == offsets
    op.verify()


def test_store_builder():
    blk, dest = tensor((16, 32), f16), tensor((64, 64), f16)
    offsets = [index(), index()]
    op = StoreOp(blk, dest, offsets)
    assert op.result.type == dest.type
    assert (op.block, op.dest, list(op.offsets)) == (blk, dest, offsets)
    op.verify()


@pytest.mark.parametrize(
    "lhs, rhs, ta, tb, expected",
    [
        ((16, 8), (8, 32), False, False, (16, 32)),
        ((8, 16), (8, 32), True, False, (16, 32)),
        ((16, 8), (32, 8), False, True, (16, 32)),
        ((8, 16), (32, 8), True, True, (16, 32)),
        ((4, 16, 8), (4, 8, 32), False, False, (4, 16, 32)),
        ((2, 3, 8, 16), (2, 3, 32, 8), True, True, (2, 3, 16, 32)),
        ((1, 1), (1, 1), True, True, (1, 1)),
    ],
)
def test_dot_builder(
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
    ta: bool,
    tb: bool,
    expected: tuple[int, ...],
):
    op = DotOp(tensor(lhs), tensor(rhs), transpose_a=ta, transpose_b=tb)
    assert op.result.type == TensorType(f32, expected)
    assert op.acc is None
    assert (op.transpose_a is not None) == ta
    assert (op.transpose_b is not None) == tb
    op.verify()
    acc = tensor(expected)
    with_acc = DotOp(tensor(lhs), tensor(rhs), acc, transpose_a=ta, transpose_b=tb)
    assert with_acc.acc is acc
    assert with_acc.result.type == acc.type
    with_acc.verify()


def test_dot_builder_keeps_the_element_type():
    op = DotOp(tensor((2, 3), i32), tensor((3, 4), i32))
    assert op.result.type == TensorType(i32, (2, 4))
    op = DotOp(tensor((2, 3), f16), tensor((3, 4), f16))
    assert op.result.type == TensorType(f16, (2, 4))


@pytest.mark.parametrize(
    "lhs, rhs, message",
    [
        ((16,), (16, 8), "dot operands must have the same rank >= 2, got 16 and 16x8"),
        ((2, 4, 8), (8, 4), "dot operands must have the same rank >= 2, got 2x4x8 and 8x4"),
        ((2, 4, 8), (3, 8, 4), "dot batch dimensions differ: 2 vs 3"),
        ((4, 8), (4, 8), "dot contraction dimensions differ: 8 vs 4"),
    ],
)
def test_dot_builder_errors(lhs: tuple[int, ...], rhs: tuple[int, ...], message: str):
    with raises(message):
        DotOp(tensor(lhs), tensor(rhs))


@pytest.mark.parametrize(
    "shape, axis, expected",
    [
        ((16, 64), 1, (16, 1)),
        ((16, 64), -1, (16, 1)),
        ((16, 64), 0, (1, 64)),
        ((16, 64), -2, (1, 64)),
        ((2, 4, 8), 1, (2, 1, 8)),
        ((8,), 0, (1,)),
    ],
)
@pytest.mark.parametrize("kind", ["sum", ReduceKind.MAX, "min"])
def test_reduce_builder(
    shape: tuple[int, ...], axis: int, expected: tuple[int, ...], kind: str
):
    op = ReduceOp(kind, tensor(shape), axis)
    assert op.result.type == TensorType(f32, expected)
    assert op.kind == ReduceKindAttr(ReduceKind(kind))
    assert op.axis.value.data == axis
    op.verify()


def test_reduce_builder_errors():
    with raises("axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)"):
        ReduceOp("sum", tensor((4, 4)), 2)
    with pytest.raises(ValueError, match="mean"):
        ReduceOp("mean", tensor((4, 4)), 0)


@pytest.mark.parametrize(
    "shapes, expected",
    [
        ([(16, 64)], (16, 64)),
        ([(16, 64), (16, 1)], (16, 64)),
        ([(16, 64), (64,)], (16, 64)),
        ([(16, 1), (1, 64)], (16, 64)),
        ([(), (4, 4)], (4, 4)),
        ([(4, 4), ()], (4, 4)),
        ([(2, 1, 8), (4, 1)], (2, 4, 8)),
    ],
)
def test_map_builder_broadcasts(shapes: list[tuple[int, ...]], expected: tuple[int, ...]):
    kind = "exp" if len(shapes) == 1 else "add"
    op = MapOp([tensor(s) for s in shapes], kind)
    assert op.result.type == TensorType(f32, expected)
    assert op.kind_name == kind
    assert not op.body.blocks
    op.verify()


def test_map_builder_with_a_body():
    x, m = tensor((16, 64), f16), tensor((16, 1), f16)
    block = Block(arg_types=[f16, f16])
    sub = arith.SubfOp(block.args[0], block.args[1])
    block.add_ops([sub, YieldOp(sub)])
    op = MapOp([x, m], body=Region(block))
    assert op.result.type == TensorType(f16, (16, 64))
    assert op.kind is None
    assert op.kind_name is None
    op.verify()
    # With an explicit result type (a body can change the element type).
    block = Block(arg_types=[f16])
    ext = arith.ExtFOp(block.args[0], f32)
    block.add_ops([ext, YieldOp(ext)])
    op = MapOp([x], body=Region(block), result_type=TensorType(f32, (16, 64)))
    assert op.result.type == TensorType(f32, (16, 64))
    op.verify()


def test_map_builder_errors():
    with raises(
        "shapes 16x64 and 16x32 are not broadcast-compatible (dimension -1: 64 vs 32)"
    ):
        MapOp([tensor((16, 64)), tensor((16, 32))], "add")
    with raises("tile.map exp takes 1 input, got 2"):
        MapOp([tensor((4,)), tensor((4,))], "exp").verify_()
    with raises("tile.map needs a kind (e.g. exp) or a body"):
        MapOp([tensor((4,))]).verify_()


@pytest.mark.parametrize(
    "shape, to",
    [
        ((16, 1), (16, 64)),
        ((64,), (16, 64)),
        ((), (4, 4)),
        ((1, 1), (2, 3, 4)),
        ((3,), (3,)),
    ],
)
def test_broadcast_builder(shape: tuple[int, ...], to: tuple[int, ...]):
    op = BroadcastOp(tensor(shape, f16), to)
    assert op.result.type == TensorType(f16, to)
    op.verify()


@pytest.mark.parametrize("to", [f16, bf16, i32, f64])
def test_cast_builder(to: Attribute):
    op = CastOp(tensor((16, 8)), to)
    assert op.result.type == TensorType(to, (16, 8))
    op.verify()


@pytest.mark.parametrize(
    "shape, perm, expected",
    [((16, 8), (1, 0), (8, 16)), ((2, 3, 4), (2, 0, 1), (4, 2, 3)), ((5,), (0,), (5,))],
)
def test_transpose_builder(
    shape: tuple[int, ...], perm: tuple[int, ...], expected: tuple[int, ...]
):
    op = TransposeOp(tensor(shape, i32), perm)
    assert op.result.type == TensorType(i32, expected)
    assert op.perm.get_values() == perm
    op.verify()


def test_transpose_builder_rejects_a_non_permutation():
    with raises("perm [0, 0] is not a permutation of the 2 dimensions of a 16x8 tensor"):
        TransposeOp(tensor((16, 8)), (0, 0))


def test_reshape_builder():
    op = ReshapeOp(tensor((4, 16)), (8, 8))
    assert op.result.type == TensorType(f32, (8, 8))
    op.verify()
    bad = ReshapeOp(tensor((4, 16)), (65,))  # the builder defers to the verifier
    with raises("reshape from 4x16 to 65 changes the element count"):
        bad.verify_()


def _loop(
    lb: int, ub: int, step: int, kind: str, inits: Sequence[SSAValue], body: Any = None
) -> ForOp:
    block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
    block.add_op(YieldOp(*block.args[1:]) if body is None else body(block))
    return ForOp(lb, ub, step, kind, inits, block)


def test_for_builder():
    x, y = tensor((4, 4)), tensor((4, 1), f16)
    op = _loop(0, 64, 16, "reduction", [x, y])
    assert [r.type for r in op.res] == [x.type, y.type]
    assert list(op.iter_args) == [x, y]
    assert op.kind == LoopKindAttr(LoopKind.REDUCTION)
    assert (op.lb.value.data, op.ub.value.data, op.step.value.data) == (0, 64, 16)
    assert op.induction_var is op.body.block.args[0]
    assert isinstance(op.induction_var.type, IndexType)
    op.verify()
    # A Region body, no carried values.
    empty = Block(arg_types=[IndexType()])
    empty.add_op(YieldOp())
    loop = ForOp(0, 4, 1, LoopKind.PARALLEL, [], Region(empty))
    assert not loop.res
    loop.verify()


@pytest.mark.parametrize(
    "lb, ub, step, trips",
    [
        (0, 64, 16, 4),
        (0, 60, 16, 4),
        (0, 65, 16, 5),
        (5, 5, 1, 0),
        (8, 0, 2, 0),
        (-4, 10, 3, 5),
    ],
)
def test_for_trip_count(lb: int, ub: int, step: int, trips: int):
    op = _loop(lb, ub, step, "parallel", [])
    assert op.trip_count == trips == len(range(lb, ub, step))


# ---------------------------------------------------------------------------------------
# Costs
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t, size",
    [
        (TensorType(f32, (16, 16)), 1024),
        (TensorType(f16, (16, 16)), 512),
        (TensorType(bf16, (3, 5)), 30),
        (TensorType(f64, (2,)), 16),
        (TensorType(i32, (4, 4)), 64),
        (TensorType(i8, (7,)), 7),
        (TensorType(i1, (8,)), 8),
        (TensorType(IndexType(), (3,)), 24),
        (TensorType(f32, ()), 4),
        (TensorType(f32, (0, 4)), 0),
        (f32, 4),
        (f16, 2),
        (i64, 8),
        (IndexType(), 8),
    ],
)
def test_nbytes(t: Attribute, size: int):
    assert nbytes(t) == size


# ---------------------------------------------------------------------------------------
# Verifier errors of ops built in Python
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: LoadOp(tensor((64, 64)), [index()], (16, 16)),
            "expected 2 offsets (one per dimension), got 1",
        ),
        (
            lambda: LoadOp(tensor((64, 64)), [index(), index()], (16, 128)),
            "block 16x128 is larger than the tensor 64x64 in dimension 1",
        ),
        (
            lambda: LoadOp(tensor((64, 64)), [index(), index()], (16,)),
            "block 16 must have the rank of the tensor 64x64",
        ),
        (
            lambda: StoreOp(tensor((4, 4), f16), tensor((8, 8)), [index(), index()]),
            "block element type f16 differs from the tensor's f32",
        ),
        (
            lambda: DotOp(tensor((4, 8)), tensor((8, 4), f16)),
            "dot operands must have the same element type",
        ),
        (
            lambda: DotOp(tensor((4, 8)), tensor((8, 4)), tensor((4, 4), f16)),
            "accumulator type tensor<4x4xf16> must be tensor<4x4xf32>",
        ),
        (
            lambda: BroadcastOp(tensor((4, 2)), (4, 8)),
            "cannot broadcast 4x2 to 4x8",
        ),
        (
            lambda: _loop(0, 4, 0, "parallel", []),
            "step must be positive, got 0",
        ),
        (
            lambda: FillOp(0, TensorType(f32, (DYNAMIC_INDEX, 4))),
            "result must have a static shape, got tensor<?x4xf32> (plmr needs static shapes)",
        ),
    ],
)
def test_verifier_errors_of_built_ops(make: Any, message: str):
    op = make()
    with raises(message):
        op.verify_()
    # `verify()` wraps the same message.
    with pytest.raises(VerifyException, match=re.escape(message)):
        op.verify()


def test_declared_result_types_must_match():
    a, b = tensor((16, 8)), tensor((8, 32))
    dot = DotOp.create(operands=[a, b], result_types=[TensorType(f32, (16, 16))])
    with raises(
        "result type tensor<16x16xf32> does not match the inferred type tensor<16x32xf32>"
    ):
        dot.verify_()
    good = ReduceOp("sum", tensor((16, 64)), 1)
    bad = ReduceOp.create(
        operands=[good.input],
        result_types=[TensorType(f32, (16,))],
        properties=dict(good.properties),
    )
    with raises(
        "result type tensor<16xf32> does not match the inferred type tensor<16x1xf32>"
    ):
        bad.verify_()
    x = tensor((4, 4))
    loop = _loop(0, 4, 1, "parallel", [x])
    wrong = ForOp.create(
        operands=[x],
        result_types=[TensorType(f16, (4, 4))],
        properties=dict(loop.properties),
        regions=[loop.detach_region(loop.body)],
    )
    with raises("results must match the iter_args types"):
        wrong.verify_()


def test_verifier_messages_are_verify_exceptions_only():
    """Malformed ops raise VerifyException (never IndexError, AttributeError, ...)."""
    x = tensor((4,))
    # A loop body without arguments, a map body without a terminator or arguments.
    loop = ForOp.create(
        properties=dict(_loop(0, 4, 1, "parallel", []).properties),
        regions=[Region(Block([YieldOp()]))],
    )
    with raises("the body's first argument must be the index (index)"):
        loop.verify_()
    no_terminator = MapOp([x], body=Region(Block(arg_types=[f32])))
    with raises("tile.map body must end with tile.yield"):
        no_terminator.verify_()
    nothing = MapOp.create(
        operands=[], result_types=[TensorType(f32, (4,))], regions=[Region()]
    )
    with raises("tile.map needs at least one input"):
        nothing.verify_()


# ---------------------------------------------------------------------------------------
# Custom syntax details
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (-math.inf, "0xfff0000000000000"),
        (math.inf, "0x7ff0000000000000"),
        (math.nan, "0x7ff8000000000000"),
        (0.0, "0.000000e+00"),
        (-0.0, "-0.000000e+00"),
        (0.1, "1.000000e-01"),
        (1 / 3, "3.333333333333333e-01"),
        (1e-300, "1.000000e-300"),
    ],
)
def test_fill_values_round_trip(value: float, text: str):
    op = FillOp(value, TensorType(f32, (2, 2)))
    printed = str(ModuleOp([op]))
    assert f"tile.fill {text} : tensor<2x2xf32>" in printed
    (parsed,) = parse(printed).ops
    assert isinstance(parsed, FillOp)
    got = parsed.value.value.data
    assert (math.isnan(got) and math.isnan(value)) or (
        got == value and math.copysign(1, got) == math.copysign(1, value)
    )


def test_fill_parses_an_integer_literal_as_its_value():
    (op,) = parse("%z = tile.fill 2 : tensor<4xf32>").ops
    assert isinstance(op, FillOp)
    assert op.value.value.data == 2.0
    (op,) = parse("%z = tile.fill -3 : tensor<4xf32>").ops
    assert isinstance(op, FillOp)
    assert op.value.value.data == -3.0


def test_fill_rejects_a_bit_pattern_wider_than_an_f64():
    with pytest.raises(ParseError, match="expected the bit pattern of an f64"):
        parse("%z = tile.fill 0x10000000000000000 : tensor<4xf32>")


def test_for_rejects_a_type_count_mismatch():
    with pytest.raises(ParseError, match=re.escape("expected 2 iter_args types, got 1")):
        parse(
            "func.func @f(%x: tensor<4xf32>) {\n"
            "  %r:2 = tile.for %i = 0 to 4 step 1 iter_args(%a = %x, %b = %x)"
            " -> (tensor<4xf32>) parallel {\n"
            "    tile.yield %a, %b : tensor<4xf32>, tensor<4xf32>\n"
            "  }\n"
            "  func.return\n"
            "}"
        )


def test_dot_flags_print_in_a_fixed_order():
    op = DotOp(tensor((8, 16)), tensor((32, 8)), transpose_b=True, transpose_a=True)
    assert op.properties == {"transpose_a": UnitAttr(), "transpose_b": UnitAttr()}
    text = str(ModuleOp([op]))
    assert " transpose_a transpose_b : " in text


# ---------------------------------------------------------------------------------------
# invalid.mlir covers every error the verifiers (and custom parsers) can raise
# ---------------------------------------------------------------------------------------


TILE_MODULES = [(tile_memory, 9), (tile_compute, 8), (tile_layout, 5), (tile_regions, 18)]
"""Each module of the tile ops, with the fewest errors it raises."""


@pytest.fixture(scope="module")
def unreached_tile_errors(unreached: Any) -> dict[str, dict[int, str]]:
    """invalid.mlir run once under a line tracer."""
    return unreached([m.__file__ for m, _ in TILE_MODULES], INVALID_MLIR)


@pytest.mark.parametrize(
    "module, minimum", TILE_MODULES, ids=lambda m: getattr(m, "__name__", "")
)
def test_every_verifier_error_is_exercised(
    unreached_tile_errors: dict[str, dict[int, str]], module: Any, minimum: int
):
    """Every raise of the tile ops is reached by invalid.mlir."""
    lines = raise_lines(module.__file__)
    assert len(lines) >= minimum, f"{module.__file__} raises {len(lines)} errors"
    missed = unreached_tile_errors[module.__file__]
    assert missed == {}, f"errors of {module.__name__} that no test triggers"


def test_invalid_mlir_has_one_chunk_per_diagnostic():
    text = INVALID_MLIR.read_text()
    chunks = text.split("\n// -----\n")
    assert len(chunks) > 60
    for chunk in chunks:
        patterns = re.findall(r"^// CHECK(?:-NEXT)?:\s*(.*)$", chunk, re.M)
        messages = [p for p in patterns if not p.startswith("{{^}}")]
        assert len(messages) == 1, chunk


def test_module_of_all_docstring_examples_verifies():
    functions = [
        docstring_example(op).replace("@doc(", f"@{op.name.split('.')[1]}(")
        for op in Tile.operations
    ]
    module = parse("\n".join(functions))
    assert len(list(module.ops)) == len(list(Tile.operations))
