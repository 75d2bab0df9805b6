"""
Graph substitution rules as data, and their text form (MLIR in the `graph` dialect).

A rule is a pair of small graphs over the same input variables that compute the same
outputs: `@rule_N_src` and `@rule_N_dst`, two `func.func` with one signature. The input
types are *representative* shapes: every dimension listed in the source function's
`plmr.symbols` attribute is a symbol (all occurrences of the value stand for one unknown
size), every other dimension is literal (conv kernel sizes). A rule marked `plmr.pointwise`
only uses elementwise ops and holds for any shapes. Every `graph.scale` of a rule scales by
the rule's one scalar variable (written as 2.0), and a `graph.constant` marked
`plmr.rule_constant = "identity"` stands for the identity matrix or conv kernel of its
shape. Rules hold in both directions; the search applies them either way.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.hints import isa

from plmr.dialects import graph
from plmr.errors import PlmrError
from plmr.passes.taso.ops import (
    IDENTITY,
    POINTWISE,
    SUBSTITUTION_KINDS,
    Params,
    Shape,
    build_op,
    describe,
    op_key,
    param_ints,
)

_OP_KINDS = frozenset(SUBSTITUTION_KINDS) - {"const"}
"""The ops a rule may use besides its identity constants."""

INPUT = -1
"""`Ref` op index of a rule input variable: `(INPUT, k)` is variable `k`."""
Ref = tuple[int, int]
"""A value in a pattern: `(op index, result index)` or `(INPUT, variable)`."""

REP_FACTOR = 2.0
"""The printed factor of every `graph.scale` in a rule (it stands for the scalar variable)."""

DEFAULT_RULES = Path(__file__).with_name("rules.mlir")
"""The rule set shipped with plmr (`rules = default` in `taso-substitute`)."""

SYMBOLS_ATTR = "plmr.symbols"
POINTWISE_ATTR = "plmr.pointwise"
CONSTANT_ATTR = "plmr.rule_constant"


@dataclass(frozen=True)
class PatOp:
    """One op of a rule side: a key, operand references and its number of results."""

    kind: str
    params: Params
    operands: tuple[Ref, ...]
    num_results: int = 1


@dataclass(frozen=True)
class Pattern:
    """One side of a rule: ops in topological order and the output values."""

    ops: tuple[PatOp, ...]
    outputs: tuple[Ref, ...]

    def kinds(self) -> list[str]:
        return [op.kind for op in self.ops]

    def used_inputs(self) -> set[int]:
        used = {r[1] for op in self.ops for r in op.operands if r[0] == INPUT}
        used |= {r[1] for r in self.outputs if r[0] == INPUT}
        return used

    def uses_scale(self) -> bool:
        return any(op.kind == "scale" for op in self.ops)


@dataclass(frozen=True)
class Rule:
    """A substitution: `src` and `dst` compute the same outputs from the same inputs."""

    name: str
    inputs: tuple[Shape, ...]
    """Representative shapes of the input variables."""
    src: Pattern
    dst: Pattern
    symbols: frozenset[int] = field(default_factory=lambda: frozenset[int]())
    """Representative dimension values that are symbols (all others are literal)."""
    pointwise: bool = False
    """Only elementwise ops: the rule holds for any (broadcast-compatible) shapes."""

    def sides(self) -> tuple[Pattern, Pattern]:
        return self.src, self.dst


# ---------------------------------------------------------------------------------------
# Instantiation at concrete sizes
# ---------------------------------------------------------------------------------------


def map_dim(d: int, dims: Mapping[int, int], symbols: frozenset[int]) -> int:
    return dims.get(d, d) if d in symbols else d


def map_shape(shape: Shape, dims: Mapping[int, int], symbols: frozenset[int]) -> Shape:
    return tuple(map_dim(d, dims, symbols) for d in shape)


def map_params(
    op: PatOp, dims: Mapping[int, int], symbols: frozenset[int], factor: float
) -> Params:
    """A pattern op's parameters at concrete sizes and scalar factor."""
    if op.kind == "split":
        sizes = param_ints(op.kind, op.params, 1, "sizes")
        return (op.params[0], tuple(map_dim(s, dims, symbols) for s in sizes))
    if op.kind == "scale":
        return (factor,)
    if op.kind == "const":
        shape = param_ints(op.kind, op.params, 1, "shape")
        return (op.params[0], map_shape(shape, dims, symbols))
    return op.params


def identity_array(shape: Shape, dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    """The identity matrix (2-D) or identity conv kernel (4-D, centre tap) of a shape."""
    out = np.zeros(shape, dtype=dtype)
    if len(shape) == 2 and shape[0] == shape[1]:
        out[np.arange(shape[0]), np.arange(shape[0])] = 1
        return out
    if len(shape) == 4 and shape[0] == shape[1] and shape[2] % 2 == 1 and shape[3] % 2 == 1:
        c = np.arange(shape[0])
        out[c, c, shape[2] // 2, shape[3] // 2] = 1
        return out
    raise PlmrError(
        f"no identity constant of shape {graph.fmt_shape(shape)} (need n x n or "
        "c x c x odd x odd)"
    )


def dense_attr(array: np.ndarray[Any, Any]) -> DenseIntOrFPElementsAttr[Any]:
    """A float32 dense elements attribute holding `array`."""
    from xdsl.dialects.builtin import BytesAttr

    data = np.ascontiguousarray(array, dtype="<f4").tobytes()
    return DenseIntOrFPElementsAttr(TensorType(f32, array.shape), BytesAttr(data))


def build_pattern_ops(
    pattern: Pattern,
    args: Sequence[SSAValue],
    dims: Mapping[int, int],
    symbols: frozenset[int],
    factor: float,
) -> tuple[list[Operation], list[SSAValue]]:
    """Builds a pattern's ops on `args` (raises VerifyException on invalid shapes)."""
    ops: list[Operation] = []
    values: list[list[SSAValue]] = []

    def get(ref: Ref) -> SSAValue:
        return args[ref[1]] if ref[0] == INPUT else values[ref[0]][ref[1]]

    for pat in pattern.ops:
        params = map_params(pat, dims, symbols, factor)
        if pat.kind == "const":
            shape = param_ints(pat.kind, params, 1, "shape")
            new = graph.ConstantOp(dense_attr(identity_array(shape)))
            new.attributes[CONSTANT_ATTR] = StringAttr(IDENTITY)
        else:
            new = build_op(pat.kind, params, [get(r) for r in pat.operands])
        ops.append(new)
        values.append(list(new.results))
    return ops, [get(r) for r in pattern.outputs]


def rule_functions(
    rule: Rule,
    dims: Mapping[int, int] | None = None,
    elt: Any = f32,
    factor: float = REP_FACTOR,
) -> tuple[func.FuncOp, func.FuncOp]:
    """`@<name>_src` and `@<name>_dst` at concrete sizes (default: representative)."""
    dims = {} if dims is None else dims
    in_types = [TensorType(elt, map_shape(s, dims, rule.symbols)) for s in rule.inputs]
    funcs: list[func.FuncOp] = []
    for side, pattern in (("src", rule.src), ("dst", rule.dst)):
        block = Block(arg_types=in_types)
        for i, arg in enumerate(block.args):
            arg.name_hint = f"x{i}"
        ops, outs = build_pattern_ops(pattern, block.args, dims, rule.symbols, factor)
        block.add_ops([*ops, func.ReturnOp(*outs)])
        fn = func.FuncOp(
            f"{rule.name}_{side}",
            (in_types, [v.type for v in outs]),
            Region(block),
        )
        funcs.append(fn)
    src, dst = funcs
    if rule.symbols:
        src.attributes[SYMBOLS_ATTR] = DenseArrayBase.from_list(i64, sorted(rule.symbols))
    if rule.pointwise:
        src.attributes[POINTWISE_ATTR] = UnitAttr()
    return src, dst


# ---------------------------------------------------------------------------------------
# Text form
# ---------------------------------------------------------------------------------------


def _term(pattern: Pattern, names: Sequence[str]) -> list[str]:
    """Renders the outputs of a pattern as terms; ops used twice get a `tN = ...` line."""
    uses: dict[int, int] = {}
    for op in pattern.ops:
        for r in op.operands:
            if r[0] != INPUT:
                uses[r[0]] = uses.get(r[0], 0) + 1
    for r in pattern.outputs:
        if r[0] != INPUT:
            uses[r[0]] = uses.get(r[0], 0) + 1
    shared: dict[int, str] = {}
    lets: list[str] = []

    def render(ref: Ref) -> str:
        if ref[0] == INPUT:
            return names[ref[1]]
        op = pattern.ops[ref[0]]
        suffix = f"#{ref[1]}" if op.num_results > 1 else ""
        if ref[0] in shared:
            return shared[ref[0]] + suffix
        text = (
            f"{describe(op.kind, op.params)}({', '.join(render(r) for r in op.operands)})"
        )
        if uses.get(ref[0], 0) > 1 or op.num_results > 1:
            name = f"t{len(shared)}"
            shared[ref[0]] = name
            lets.append(f"{name} = {text}")
            return name + suffix
        return text

    outs = [render(r) for r in pattern.outputs]
    body = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
    return [*lets, body]


def describe_pattern(pattern: Pattern) -> str:
    """A one-line term form of a rule side, e.g. `matmul(x0, add(x1, x2))`."""
    names = [f"x{i}" for i in range(1 + max(pattern.used_inputs() | {0}))]
    parts = _term(pattern, names)
    if len(parts) == 1:
        return parts[0]
    return f"{parts[-1]} where {', '.join(parts[:-1])}"


def describe_rule(rule: Rule) -> str:
    """`name: src => dst`, with the input shapes."""
    shapes = ", ".join(f"x{i}:{graph.fmt_shape(s)}" for i, s in enumerate(rule.inputs))
    shape_note = "any shape" if rule.pointwise else shapes
    return (
        f"{rule.name}: {describe_pattern(rule.src)} => {describe_pattern(rule.dst)}"
        f"  [{shape_note}]"
    )


RULES_HEADER = """\
// Graph substitution rules for plmr's `taso-substitute` pass, generated by
// `plmr rules generate` and checked by `plmr rules verify`.
//
// Each rule is a pair @rule_N_src / @rule_N_dst of functions that compute the same
// outputs from the same inputs. Dimensions listed in `plmr.symbols` are symbolic sizes;
// other dimensions are literal. `plmr.pointwise` rules hold for any shapes. Every
// graph.scale scales by the rule's scalar variable; a graph.constant marked
// plmr.rule_constant = "identity" is the identity of its shape.
"""


def rules_text(rules: Sequence[Rule], header: str = RULES_HEADER) -> str:
    """The MLIR text of a rule set: one commented `func.func` pair per rule."""
    out = io.StringIO()
    out.write(header)
    out.write("builtin.module {\n")
    for rule in rules:
        out.write(f"  // {describe_rule(rule)}\n")
        for fn in rule_functions(rule):
            buf = io.StringIO()
            Printer(stream=buf).print_op(fn)
            for line in buf.getvalue().rstrip("\n").splitlines():
                out.write(f"  {line}\n")
    out.write("}\n")
    return out.getvalue()


def pattern_from_function(fn: func.FuncOp) -> Pattern:
    """Reads one rule side back from its function (raises PlmrError if not a rule)."""
    where = f"@{fn.sym_name.data}"
    refs: dict[SSAValue, Ref] = {}
    for i, arg in enumerate(fn.body.block.args):
        refs[arg] = (INPUT, i)
    ops: list[PatOp] = []
    outputs: tuple[Ref, ...] | None = None
    for op in fn.body.block.ops:
        if isinstance(op, func.ReturnOp):
            outputs = tuple(refs[v] for v in op.arguments)
            break
        if isinstance(op, graph.ConstantOp):
            kind_attr = op.attributes.get(CONSTANT_ATTR)
            if kind_attr != StringAttr(IDENTITY):
                raise PlmrError(
                    f"{where}: a rule constant must be marked "
                    f'{CONSTANT_ATTR} = "{IDENTITY}" (only identity constants are rules\' '
                    "constants)"
                )
            key: tuple[str, Params] = (
                "const",
                (IDENTITY, graph.static_shape(op.result, "constant")),
            )
        else:
            found = op_key(op)
            if found is None or found[0] not in _OP_KINDS:
                raise PlmrError(
                    f"{where}: '{op.name}' is not in the substitution op set (matmul, add, "
                    "mul, scale, relu, transpose, concat, split, conv2d, pool, constant)"
                )
            key = found
            if key[0] == "scale":
                key = ("scale", (REP_FACTOR,))
        index = len(ops)
        ops.append(
            PatOp(key[0], key[1], tuple(refs[v] for v in op.operands), len(op.results))
        )
        for r, res in enumerate(op.results):
            refs[res] = (index, r)
    if outputs is None:
        raise PlmrError(f"{where}: a rule function must end with func.return")
    if not ops:
        raise PlmrError(f"{where}: a rule side needs at least one op")
    return Pattern(tuple(ops), outputs)


def rules_from_module(module: ModuleOp, source: str = "<rules>") -> list[Rule]:
    """The rules of a module of `@<name>_src` / `@<name>_dst` function pairs."""
    funcs: dict[str, func.FuncOp] = {}
    order: list[str] = []
    for op in module.ops:
        if not isinstance(op, func.FuncOp):
            raise PlmrError(
                f"{source}: a rule file holds only func.func ops, got '{op.name}'"
            )
        funcs[op.sym_name.data] = op
        order.append(op.sym_name.data)
    rules: list[Rule] = []
    for name in order:
        if name.endswith("_dst"):
            if name[: -len("_dst")] + "_src" not in funcs:
                raise PlmrError(f"{source}: @{name} has no matching @{name[:-4]}_src")
            continue
        if not name.endswith("_src"):
            raise PlmrError(
                f"{source}: @{name}: rule functions are named @<rule>_src and @<rule>_dst"
            )
        base = name[: -len("_src")]
        src_fn = funcs[name]
        dst_fn = funcs.get(base + "_dst")
        if dst_fn is None:
            raise PlmrError(f"{source}: @{name} has no matching @{base}_dst")
        if src_fn.function_type != dst_fn.function_type:
            raise PlmrError(
                f"{source}: @{base}_src and @{base}_dst have different signatures "
                f"({src_fn.function_type} vs {dst_fn.function_type})"
            )
        inputs: list[Shape] = []
        for t in src_fn.function_type.inputs.data:
            if not isa(t, TensorType[Attribute]):
                raise PlmrError(f"{source}: @{name}: rule inputs must be tensors, got {t}")
            inputs.append(t.get_shape())
        symbols_attr = src_fn.attributes.get(SYMBOLS_ATTR)
        symbols: frozenset[int] = frozenset()
        if symbols_attr is not None:
            if not isinstance(symbols_attr, DenseArrayBase):
                raise PlmrError(
                    f"{source}: @{name}: {SYMBOLS_ATTR} must be an array<i64: ...>"
                )
            symbols = frozenset(int(v) for v in symbols_attr.get_values())
        rules.append(
            Rule(
                name=base,
                inputs=tuple(inputs),
                src=pattern_from_function(src_fn),
                dst=pattern_from_function(dst_fn),
                symbols=symbols,
                pointwise=POINTWISE_ATTR in src_fn.attributes,
            )
        )
    return rules


def parse_rules(text: str, source: str = "<rules>") -> list[Rule]:
    """Parses and checks the MLIR text of a rule set."""
    from plmr.dialects.context import parse_module

    module = parse_module(text, source)
    rules = rules_from_module(module, source)
    for rule in rules:
        check_rule(rule, source)
    return rules


def check_rule(rule: Rule, source: str = "<rules>") -> None:
    """Raises a PlmrError if a rule cannot be applied as written."""
    for side in rule.sides():
        if len(side.outputs) != len(rule.src.outputs):
            raise PlmrError(f"{source}: @{rule.name}: both sides need the same outputs")
    if rule.src.uses_scale() != rule.dst.uses_scale():
        raise PlmrError(
            f"{source}: @{rule.name}: the scalar variable (graph.scale) must appear on "
            "both sides"
        )
    if rule.pointwise and any(k not in POINTWISE for s in rule.sides() for k in s.kinds()):
        raise PlmrError(
            f"{source}: @{rule.name}: {POINTWISE_ATTR} rules may only use "
            f"{', '.join(sorted(POINTWISE))}"
        )
    try:
        rule_functions(rule)
    except VerifyException as e:
        raise PlmrError(f"{source}: @{rule.name}: invalid at its own shapes: {e}") from e


def forget_loaded_rules() -> None:
    """Drops the rule sets this process has loaded (the on-disk cache stays)."""
    _load_rules_cached.cache_clear()


def load_rules(path: str | Path | None = None) -> list[Rule]:
    """
    The rules of a file (default: the shipped set), cached in the process by path and
    mtime, and on disk by the file's hash (`rule_cache`).
    """
    p = DEFAULT_RULES if path is None or str(path) == "default" else Path(path)
    try:
        stamp = p.stat().st_mtime_ns
    except FileNotFoundError as e:
        raise PlmrError(f"no such rule file: {p}") from e
    return list(_load_rules_cached(str(p.resolve()), stamp))


@functools.lru_cache(maxsize=8)
def _load_rules_cached(path: str, stamp: int) -> tuple[Rule, ...]:
    del stamp
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PlmrError(f"cannot read rule file {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise PlmrError(
            f"rule file {path} is not a text (.mlir) file: byte {e.start} is not UTF-8"
        ) from e
    if not text.strip():
        raise PlmrError(
            f"rule file {path} is empty: expected rules as written by plmr rules generate"
        )
    from plmr.passes.taso.rule_cache import cached

    return tuple(cached(text, lambda t: parse_rules(t, path)))
