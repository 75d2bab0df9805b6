"""
Every `graph` op has each piece docs/design.md ("Adding an op") asks for: its reference
semantics, its lowering to loops, its cost in graph substitutions, a draw in the program
fuzzer and, for a unary elementwise op, an ONNX importer entry, unless an exemption below
gives the reason. A new op missing a piece fails with a message naming the op and the
piece, and where to add it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from xdsl.ir import Operation
from xdsl.irdl import irdl_op_definition

from plmr.dialects import graph
from plmr.dialects.graph import Domain, UnaryMeaning
from plmr.frontend.onnx.elementwise import UNARY_OPS
from plmr.lowering.graph_to_loop import GRAPH_LOWERINGS
from plmr.passes.taso.cost import ELEMENT_WORK, SHAPED_KINDS
from plmr.passes.taso.ops import BINARY_KINDS, UNARY_KINDS
from plmr.runtime.reference import REFERENCE
from plmr.validate.fuzz.graph_gen import DRAWN_OPS
from plmr.validate.fuzz.unary_draws import UNARY_EXEMPT

_PRICED_BY_OWN_FORMULA: dict[type[Operation], str] = {
    graph.MatmulOp: "matmul",
    graph.Conv2dOp: "conv2d",
    graph.PoolOp: "pool",
    graph.TransposeOp: "transpose",
    graph.ConcatOp: "concat",
    graph.SplitOp: "split",
    graph.ScaleOp: "scale",
    graph.GeluOp: "gelu",
}
"""The ops `passes.taso.ops.op_key` gives a kind of their own (beyond the unary and binary
elementwise kinds)."""

COST_EXEMPT: dict[type[Operation], str] = {
    graph.ConstantOp: "a literal: a `const` node, which costs nothing",
    graph.WeightOp: "a tensor in the weights file: a `const` node, which costs nothing",
}
FUZZ_EXEMPT: dict[type[Operation], str] = {
    graph.WeightOp: "its values live in a file; fuzzed programs hold constants inline",
    **UNARY_EXEMPT,
}
IMPORTER_EXEMPT: dict[type[Operation], str] = {
    graph.SiluOp: "ONNX has no Silu: `graph-canonicalize` forms it from x·sigmoid(x)",
}


def taso_kind(cls: type[Operation]) -> str:
    """The kind graph substitutions give ops of `cls` (`op_key`), or its opaque kind."""
    for kind, known in (*UNARY_KINDS.items(), *BINARY_KINDS.items()):
        if known is cls:
            return kind
    return _PRICED_BY_OWN_FORMULA.get(cls, f"opaque:{cls.name}")


@dataclass
class Pieces:
    """The registrations an op needs, as sets of op classes (or kinds, for costs)."""

    reference: set[type[Operation]] = field(default_factory=lambda: set(REFERENCE))
    lowering: set[type[Operation]] = field(default_factory=lambda: set(GRAPH_LOWERINGS))
    priced: set[str] = field(
        default_factory=lambda: set(ELEMENT_WORK) | SHAPED_KINDS | {"scale", "gelu"}
    )
    drawn: set[type[Operation]] = field(default_factory=lambda: set(DRAWN_OPS))
    imported: set[type[Operation]] = field(default_factory=lambda: set(UNARY_OPS.values()))

    def missing(self, cls: type[Operation]) -> list[str]:
        """What `cls` lacks, one message per piece naming the op and where it goes."""
        name = cls.__name__
        where: list[tuple[bool, str]] = [
            (
                cls in self.reference,
                "reference semantics (a MEANING, or runtime/reference.py REFERENCE)",
            ),
            (
                cls in self.lowering,
                "loop lowering (a MEANING, or lowering/graph_to_loop.py GRAPH_LOWERINGS)",
            ),
            (
                cls in COST_EXEMPT or taso_kind(cls) in self.priced,
                "cost entry (a MEANING, or passes/taso/cost.py ELEMENT_WORK)",
            ),
            (
                cls in FUZZ_EXEMPT or cls in self.drawn,
                "fuzz generator (a MEANING, or validate/fuzz/unary_draws.py or "
                "graph_gen.py DRAWN_OPS)",
            ),
            (
                not issubclass(cls, graph.UnaryElementwiseOp)
                or cls in IMPORTER_EXEMPT
                or cls in self.imported,
                "importer entry (frontend/onnx/elementwise.py UNARY_OPS)",
            ),
        ]
        return [f"{name}: no {piece}" for present, piece in where if not present]


def test_every_graph_op_has_every_piece():
    pieces = Pieces()
    ops: list[type[Operation]] = list(graph.Graph.operations)
    assert len(ops) > 40
    missing = [m for cls in ops for m in pieces.missing(cls)]
    assert not missing, "\n".join(missing)


def test_every_exemption_is_of_a_graph_op():
    ops = set(graph.Graph.operations)
    for table in (COST_EXEMPT, FUZZ_EXEMPT, IMPORTER_EXEMPT):
        assert set(table) <= ops
        assert all(reason for reason in table.values())


@irdl_op_definition
class _FrobOp(graph.UnaryElementwiseOp):
    """
    A unary op registered nowhere.

    ```mlir
    %r = test.frob %a : tensor<4xf32>
    ```
    """

    name = "test.frob"


@irdl_op_definition
class _TwistOp(graph.UnaryElementwiseOp):
    """
    A unary op that carries its meaning but is not in the `graph` dialect.

    ```mlir
    %r = test.twist %a : tensor<4xf32>
    ```
    """

    name = "test.twist"

    MEANING: ClassVar[UnaryMeaning | None] = UnaryMeaning(
        numpy=lambda x: x, body=lambda x: x, domain=Domain.ANY, bound=lambda b: b
    )


def test_an_op_registered_nowhere_is_told_every_piece_it_lacks():
    assert Pieces().missing(_FrobOp) == [
        "_FrobOp: no reference semantics (a MEANING, or runtime/reference.py REFERENCE)",
        "_FrobOp: no loop lowering (a MEANING, or lowering/graph_to_loop.py "
        "GRAPH_LOWERINGS)",
        "_FrobOp: no cost entry (a MEANING, or passes/taso/cost.py ELEMENT_WORK)",
        "_FrobOp: no fuzz generator (a MEANING, or validate/fuzz/unary_draws.py or "
        "graph_gen.py DRAWN_OPS)",
        "_FrobOp: no importer entry (frontend/onnx/elementwise.py UNARY_OPS)",
    ]


@pytest.mark.parametrize("piece", ["reference", "lowering", "priced", "drawn", "imported"])
def test_an_op_missing_one_piece_is_told_that_piece(piece: str):
    """Each piece alone: the op has all the others and is told only the one it lacks."""
    pieces = Pieces()
    pieces.reference.add(_FrobOp)
    pieces.lowering.add(_FrobOp)
    pieces.priced.add("opaque:test.frob")
    pieces.drawn.add(_FrobOp)
    pieces.imported.add(_FrobOp)
    assert pieces.missing(_FrobOp) == []
    held = getattr(pieces, piece)
    held.discard("opaque:test.frob" if piece == "priced" else _FrobOp)
    (message,) = pieces.missing(_FrobOp)
    assert message.startswith("_FrobOp: no ")
    keyword = {
        "reference": "reference semantics",
        "lowering": "loop lowering",
        "priced": "cost entry",
        "drawn": "fuzz generator",
        "imported": "importer entry",
    }[piece]
    assert keyword in message


def test_a_meaning_outside_the_dialect_is_not_derived():
    """Entries are derived for the ops of `Graph`: an op must also be added there."""
    assert _TwistOp not in graph.unary_meanings()
    assert len(Pieces().missing(_TwistOp)) == 5


def test_the_ops_that_carry_their_meaning_get_every_piece_derived():
    meanings = graph.unary_meanings()
    assert {graph.SinhOp, graph.CoshOp} <= set(meanings)
    for cls in meanings:
        assert cls in REFERENCE
        assert cls in GRAPH_LOWERINGS
        assert f"opaque:{cls.name}" in ELEMENT_WORK
        assert cls in DRAWN_OPS
