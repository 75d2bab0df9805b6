"""
Search graphs and substitution rules as egglog programs.

Every value of a graph is an e-class of sort `T`. Ops are interned as `(kind, params)` keys
(`Keys`) and written `(N<arity> key operands...)`; three ops get their own constructors
because rules bind their parameters: `(Scale factor x)` (the rule's scalar variable),
`(Split axis s0 s1 x)` (a two-way split, read with `(Res i split)`; its sizes bind the
rule's symbolic sizes) and `(Ident shape)` (an identity matrix or conv kernel). Function
arguments are `(Arg i)` and constants `(Const i)`: the index of the constant in the search
context, never its data, so the e-graph grows with the number of ops, not with weights.
The shape of every value is the function `(sh x)` (a `Vec i64`).

A rule direction becomes one egglog `rule`: the matched side is a conjunction of patterns
(two outputs are two patterns joined by their shared variables, as Tensat's multi-pattern
rules), the shapes of the input variables bind the rule's symbolic sizes, and the action
builds the other side, sets the shapes of its new values and unions the outputs. A rule
over matmul, elementwise ops, transposes, concats and splits also holds per element of
leading batch dimensions: it is emitted once per batch rank the graph has, every input
variable then carrying the same batch dimensions. Directions that cannot be expressed are
reported with the reason, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from plmr.passes.taso.dag import Dag, Node
from plmr.passes.taso.matcher import LIFTABLE, lift_params
from plmr.passes.taso.ops import (
    COMMUTATIVE,
    Params,
    Shape,
    param_float,
    param_int,
    param_ints,
)
from plmr.passes.taso.rules import INPUT, PatOp, Pattern, Ref, Rule

MAX_RANK = 6
"""Shapes of up to this rank are encoded (`S0` ... `S6`)."""

PRELUDE = (
    "(datatype Shape "
    + " ".join(f"(S{r}{' i64' * r})" for r in range(MAX_RANK + 1))
    + ")\n"
    + """\
(datatype T
  (Arg i64)
  (Const i64)
  (Ident Shape)
  (N1 i64 T)
  (N2 i64 T T)
  (N3 i64 T T T)
  (N4 i64 T T T T)
  (Scale i64 T)
  (Split i64 i64 i64 T)
  (Res i64 T))
(function sh (T) Shape :merge old)
(function via (T) i64 :merge old)
(ruleset single)
(ruleset multi)
"""
)
"""Sorts, constructors, the shape and provenance functions, and the two rulesets."""

MAX_OPERANDS = 4
"""Ops with more operands are not encoded (the engine then leaves the function alone)."""

Dim = str
"""A dimension as an egglog expression: a literal, a bound variable or arithmetic on them."""


@dataclass
class Keys:
    """Interned `(kind, params)` keys and scale factors of one program."""

    keys: list[tuple[str, Params]] = field(
        default_factory=lambda: list[tuple[str, Params]]()
    )
    index: dict[tuple[str, Params], int] = field(
        default_factory=lambda: dict[tuple[str, Params], int]()
    )
    factors: list[float] = field(default_factory=lambda: list[float]())
    factor_index: dict[float, int] = field(default_factory=lambda: dict[float, int]())

    def key(self, kind: str, params: Params) -> int:
        k = (kind, params)
        found = self.index.get(k)
        if found is None:
            found = len(self.keys)
            self.keys.append(k)
            self.index[k] = found
        return found

    def factor(self, value: float) -> int:
        found = self.factor_index.get(value)
        if found is None:
            found = len(self.factors)
            self.factors.append(value)
            self.factor_index[value] = found
        return found


def vec(dims: Iterable[object]) -> str:
    """A shape as an egglog `Shape` term (`?S`: a pointwise rule's shape)."""
    dims = tuple(dims)
    if dims == ("?S",):
        return "?S"
    if len(dims) > MAX_RANK:
        raise EncodeError(
            f"a value of rank {len(dims)} (the encoding holds up to {MAX_RANK})"
        )
    return f"(S{len(dims)}{''.join(f' {d}' for d in dims)})"


# ---------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------


class EncodeError(Exception):
    """A graph the e-graph encoding cannot hold (the reason is the message)."""


def node_term(node: Node, operands: Sequence[str], keys: Keys) -> str:
    """The constructor term of one search-graph node over operand terms."""
    if node.kind == "arg":
        return f"(Arg {node.params[0]})"
    if node.kind == "const":
        return f"(Const {node.params[1]})"
    if node.kind == "scale":
        factor = param_float(node.kind, node.params, 0, "factor")
        return f"(Scale {keys.factor(factor)} {operands[0]})"
    if node.kind == "split" and len(node.shapes) == 2:
        axis = param_int(node.kind, node.params, 0, "axis")
        sizes = param_ints(node.kind, node.params, 1, "sizes")
        return f"(Split {axis} {sizes[0]} {sizes[1]} {operands[0]})"
    if not 1 <= len(operands) <= MAX_OPERANDS:
        raise EncodeError(
            f"'{node.kind}' has {len(operands)} operands (the encoding holds 1 to "
            f"{MAX_OPERANDS})"
        )
    key = keys.key(node.kind, node.params)
    return f"(N{len(operands)} {key} {' '.join(operands)})"


def encode_graph(dag: Dag, keys: Keys, identities: set[int]) -> tuple[str, dict[int, str]]:
    """
    The egglog facts of a graph: one global per node (`$vN`, and `$vN_r` for each result
    of a multi-result op) with its shape. `identities` are the `const` nodes that are
    identity matrices or kernels (rules match them as `Ident`).
    """
    lines: list[str] = []
    names: dict[int, str] = {}

    def ref(v: tuple[int, int]) -> str:
        nid, r = v
        if len(dag.nodes[nid].shapes) == 1:
            return names[nid]
        return f"{names[nid]}_{r}"

    for nid in dag.order():
        node = dag.nodes[nid]
        name = f"$v{nid}"
        names[nid] = name
        if nid in identities:
            term = f"(Ident {vec(node.shapes[0])})"
        else:
            term = node_term(node, [ref(o) for o in node.operands], keys)
        lines.append(f"(let {name} {term})")
        if len(node.shapes) == 1:
            lines.append(f"(set (sh {name}) {vec(node.shapes[0])})")
        else:
            for r, shape in enumerate(node.shapes):
                lines.append(f"(let {name}_{r} (Res {r} {name}))")
                lines.append(f"(set (sh {name}_{r}) {vec(shape)})")
    return "\n".join(lines) + "\n", names


# ---------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Untranslated:
    """A rule direction with no egglog form, and why."""

    label: str
    reason: str


@dataclass
class RuleSet:
    """The egglog rules of a rule set for one graph, and the directions left out."""

    rules: list[str] = field(default_factory=lambda: list[str]())
    labels: list[str] = field(default_factory=lambda: list[str]())
    """Rule direction of every `via` provenance number."""
    multi: int = 0
    """Emitted rules whose outputs come from several ops (ruleset `multi`)."""
    untranslated: list[Untranslated] = field(default_factory=lambda: list[Untranslated]())


def _add(a: Dim, b: Dim) -> Dim:
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        return str(int(a) + int(b))
    if b == "0":
        return a
    if a == "0":
        return b
    return f"(+ {a} {b})"


def _window(size: Dim, kernel: Dim, stride: int, pad: int, dilation: int) -> Dim:
    """Output size of a sliding window (conv, pool) on an input of `size`."""
    if not kernel.isdigit():
        raise EncodeError("a symbolic kernel size")
    span = dilation * (int(kernel) - 1) + 1
    if size.isdigit():
        return str((int(size) + pad - span) // stride + 1)
    if stride == 1:
        return _add(size, str(pad - span + 1))
    return f"(+ (/ (+ {size} {pad - span}) {stride}) 1)"


def _ints(kind: str, params: Params, index: int, name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in param_ints(kind, params, index, name))


def infer_dims(
    kind: str, params: Params, operands: Sequence[tuple[Dim, ...]]
) -> list[tuple[Dim, ...]]:
    """Result shapes of a (lifted) rule op on symbolic operand shapes."""
    if kind == "matmul":
        a, b = operands
        m = a[-1] if params[0] else a[-2]
        n = b[-2] if params[1] else b[-1]
        prefix = a[:-2] if len(a) >= len(b) else b[:-2]
        return [(*prefix, m, n)]
    if kind in ("add", "mul"):
        a, b = operands
        if len(a) < len(b):
            a, b = b, a
        lead = a[: len(a) - len(b)]
        tail = a[len(a) - len(b) :]
        return [(*lead, *(y if x == "1" else x for x, y in zip(tail, b, strict=True)))]
    if kind in ("scale", "relu"):
        return [operands[0]]
    if kind == "transpose":
        perm = _ints(kind, params, 0, "perm")
        return [tuple(operands[0][p] for p in perm)]
    if kind == "concat":
        axis = param_int(kind, params, 0, "axis")
        a, b = operands
        return [tuple(_add(x, y) if i == axis else x for i, (x, y) in enumerate(zip(a, b)))]
    if kind == "conv2d":
        x, w = operands[0], operands[1]
        strides = _ints(kind, params, 0, "strides")
        pads = _ints(kind, params, 1, "pads")
        dilations = _ints(kind, params, 2, "dilations")
        return [
            (
                x[0],
                w[0],
                _window(x[2], w[2], strides[0], pads[0] + pads[2], dilations[0]),
                _window(x[3], w[3], strides[1], pads[1] + pads[3], dilations[1]),
            )
        ]
    if kind == "pool":
        x = operands[0]
        kernel = _ints(kind, params, 1, "kernel")
        strides = _ints(kind, params, 2, "strides")
        pads = _ints(kind, params, 3, "pads")
        return [
            (
                x[0],
                x[1],
                _window(x[2], str(kernel[0]), strides[0], pads[0] + pads[2], 1),
                _window(x[3], str(kernel[1]), strides[1], pads[1] + pads[3], 1),
            )
        ]
    raise EncodeError(f"no symbolic shape rule for '{kind}'")


class _Direction:
    """Translation of one direction of one rule at one batch rank."""

    def __init__(
        self,
        rule: Rule,
        frm: Pattern,
        to: Pattern,
        batch: int,
        keys: Keys,
        via: int,
        unbatched: frozenset[int] = frozenset(),
    ):
        self.unbatched = unbatched
        self.value_batch: dict[Ref, int] = {}
        self.rule, self.frm, self.to, self.batch, self.keys, self.via = (
            rule,
            frm,
            to,
            batch,
            keys,
            via,
        )
        self.query: list[str] = []
        self.actions: list[str] = []
        self.bound: set[str] = set()
        self.batch_dims = tuple(f"?B{i}" for i in range(batch))

    def dim(self, d: int) -> Dim:
        """A representative dimension as an expression (a symbol or a literal)."""
        if d in self.rule.symbols:
            return f"?d{d}"
        return str(d)

    def bind_shape(self, var: str, rep: Shape, tag: str) -> tuple[Dim, ...]:
        """Query atoms binding the shape of `var` (rank and sizes); its symbolic shape."""
        if self.rule.pointwise:
            self.query.append(f"(= (sh {var}) ?S)")
            return ("?S",)
        batch = self.batch_dims if self.batch_of_var(tag) else ()
        shape = (*batch, *(self.dim(d) for d in rep))
        self.query.append(f"(= (sh {var}) {vec(shape)})")
        self.bound |= {self.dim(d) for d in rep if d in self.rule.symbols}
        return shape

    def batch_of_var(self, tag: str) -> int:
        """The batch rank of the value a `bind_shape` tag names (`xK`: input K)."""
        if tag.startswith("x") and int(tag[1:]) in self.unbatched:
            return 0
        return 0 if tag.startswith("c") else self.batch

    def op_batch(self, op: PatOp) -> int:
        """An op's batch rank: its operands' (broadcast); concatenations need one."""
        batches = [self.value_batch.get(r, self.batch) for r in op.operands]
        if op.kind == "concat" and len(set(batches)) > 1:
            raise EncodeError("a concatenation of batched and unbatched values")
        return max(batches, default=0)

    def params(self, op: PatOp) -> Params:
        params = op.params
        if op.kind in LIFTABLE and not self.rule.pointwise:
            params = lift_params(op.kind, params, self.op_batch(op))
        return params

    def note_batch(self, j: int, op: PatOp) -> None:
        b = self.op_batch(op)
        for r in range(op.num_results):
            self.value_batch[(j, r)] = b

    def translate(self, label: str) -> str:
        rule, frm, to = self.rule, self.frm, self.to
        var_shape: dict[int, tuple[Dim, ...]] = {}
        names: dict[Ref, str] = {}
        for k in sorted(frm.used_inputs()):
            names[(INPUT, k)] = f"?x{k}"
            self.value_batch[(INPUT, k)] = 0 if k in self.unbatched else self.batch
        # The matched side: one atom per op, operands first.
        for j, op in enumerate(frm.ops):
            args = [names[r] for r in op.operands]
            out = f"?o{j}"
            if op.kind == "scale":
                self.query.append(f"(= {out} (Scale ?f {args[0]}))")
            elif op.kind == "split":
                params = self.params(op)
                axis = param_int(op.kind, params, 0, "axis")
                sizes = param_ints(op.kind, params, 1, "sizes")
                dims = [self.dim(s) for s in sizes]
                self.bound |= {d for d in dims if d.startswith("?")}
                self.query.append(f"(= {out} (Split {axis} {dims[0]} {dims[1]} {args[0]}))")
            elif op.kind == "const":
                self.query.append(f"(= {out} (Ident ?c{j}))")
            else:
                key = self.keys.key(op.kind, self.params(op))
                self.query.append(f"(= {out} (N{len(args)} {key} {' '.join(args)}))")
            self.note_batch(j, op)
            if op.num_results == 1:
                names[(j, 0)] = out
            else:
                for r in range(op.num_results):
                    names[(j, r)] = f"{out}_{r}"
                    self.query.append(f"(= {out}_{r} (Res {r} {out}))")
            if op.kind == "const":
                shape = _ints(op.kind, op.params, 1, "shape")
                self.bind_shape(out, shape, f"c{j}")
        for k in sorted(frm.used_inputs()):
            var_shape[k] = self.bind_shape(f"?x{k}", rule.inputs[k], f"x{k}")
        outs = [names[r] for r in frm.outputs]
        for a in range(len(outs)):
            for b in range(a + 1, len(outs)):
                self.query.append(f"(!= {outs[a]} {outs[b]})")
        # The new side.
        shapes: dict[Ref, tuple[Dim, ...]] = {(INPUT, k): s for k, s in var_shape.items()}
        new: dict[Ref, str] = {(INPUT, k): f"?x{k}" for k in var_shape}
        self.value_batch = {r: b for r, b in self.value_batch.items() if r[0] == INPUT}
        for j, op in enumerate(to.ops):
            args = [new[r] for r in op.operands]
            out = f"?n{j}"
            if rule.pointwise:
                result_shapes: list[tuple[Dim, ...]] = [("?S",)] * op.num_results
            elif op.kind == "split":
                params = self.params(op)
                axis = param_int(op.kind, params, 0, "axis")
                sizes = param_ints(op.kind, params, 1, "sizes")
                src = shapes[op.operands[0]]
                result_shapes = [
                    tuple(self.dim(s) if i == axis else d for i, d in enumerate(src))
                    for s in sizes
                ]
            elif op.kind == "const":
                shape = _ints(op.kind, op.params, 1, "shape")
                result_shapes = [tuple(self.dim(d) for d in shape)]
            else:
                result_shapes = infer_dims(
                    op.kind, self.params(op), [shapes[r] for r in op.operands]
                )
            if op.kind == "scale":
                term = f"(Scale ?f {args[0]})"
            elif op.kind == "split":
                params = self.params(op)
                axis = param_int(op.kind, params, 0, "axis")
                sizes = param_ints(op.kind, params, 1, "sizes")
                d0, d1 = (self.dim(s) for s in sizes)
                term = f"(Split {axis} {d0} {d1} {args[0]})"
            elif op.kind == "const":
                term = f"(Ident {vec(result_shapes[0])})"
            else:
                key = self.keys.key(op.kind, self.params(op))
                term = f"(N{len(args)} {key} {' '.join(args)})"
            self.actions.append(f"(let {out} {term})")
            self.note_batch(j, op)
            for r, shape in enumerate(result_shapes):
                ref = f"{out}_{r}" if op.num_results > 1 else out
                if op.num_results > 1:
                    self.actions.append(f"(let {ref} (Res {r} {out}))")
                new[(j, r)] = ref
                shapes[(j, r)] = shape
                self.actions.append(f"(set (sh {ref}) {vec(shape)})")
                self.actions.append(f"(set (via {ref}) {self.via})")
        used = {
            tok.strip("()")
            for shape in shapes.values()
            for d in shape
            for tok in d.split()
            if tok.strip("()").startswith("?d")
        }
        if not used <= self.bound:
            raise EncodeError(
                f"the new side needs sizes the matched side does not bind "
                f"({', '.join(sorted(used - self.bound))})"
            )
        for old_ref, new_ref in zip(frm.outputs, to.outputs, strict=True):
            self.actions.append(f"(union {names[old_ref]} {new[new_ref]})")
        ruleset = "multi" if is_multi(frm) else "single"
        return (
            f"(rule ({' '.join(self.query)})\n      ({' '.join(self.actions)})\n"
            f'      :ruleset {ruleset} :name "{label}")'
        )


def is_multi(pattern: Pattern) -> bool:
    """Whether a matched side has outputs of several ops (patterns joined by variables)."""
    return len({r[0] for r in pattern.outputs}) > 1


def _ranks(rule: Rule, pattern: Pattern) -> list[int]:
    return [len(rule.inputs[k]) for k in sorted(pattern.used_inputs())]


Signature = tuple[object, ...]
"""What a pattern op needs in the graph to match: its kind and (lifted) parameters;
split sizes, scale factors and identity shapes are bound by matching, so left out."""


def signature(kind: str, params: Params) -> Signature:
    if kind == "split":
        return ("split", params[0])
    if kind in ("scale", "const"):
        return (kind,)
    return (kind, params)


def graph_signatures(dag: Dag, identities: set[int]) -> set[Signature]:
    """The signatures of a graph's ops (its identity constants included)."""
    out: set[Signature] = set()
    for nid, node in dag.nodes.items():
        if node.kind == "const":
            if nid in identities:
                out.add(("const",))
        elif node.kind != "arg" and not node.kind.startswith("opaque:"):
            out.add(signature(node.kind, node.params))
    return out


@dataclass(frozen=True)
class _Candidate:
    rule: Rule
    frm: Pattern
    to: Pattern
    label: str
    batch: int
    needs: frozenset[Signature]
    gives: frozenset[Signature]
    unbatched: frozenset[int] = frozenset()


def _signatures(rule: Rule, pattern: Pattern, batch: int) -> frozenset[Signature]:
    out: set[Signature] = set()
    for op in pattern.ops:
        params = op.params
        if op.kind in LIFTABLE and not rule.pointwise:
            params = lift_params(op.kind, params, batch)
        out.add(signature(op.kind, params))
    return frozenset(out)


def translate_rules(
    rules: Sequence[Rule],
    keys: Keys,
    graph_ranks: set[int],
    graph_keys: set[Signature] | None = None,
) -> RuleSet:
    """
    The egglog rules of both directions of every rule, at the batch ranks of a graph.
    With `graph_keys` (the signatures of a graph's ops), only directions whose matched
    side can occur in the graph after any rewriting are emitted; the others never match.
    """
    out = RuleSet()
    add_key = keys.key("add", ())
    mul_key = keys.key("mul", ())
    for key in (add_key, mul_key):
        out.rules.append(
            f"(rule ((= ?e (N2 {key} ?a ?b))) ((union ?e (N2 {key} ?b ?a)))"
            f' :ruleset single :name "commute {keys.keys[key][0]}")'
        )
    assert COMMUTATIVE == {"add", "mul"}
    top = max(graph_ranks, default=0)
    candidates: list[_Candidate] = []
    for rule in rules:
        liftable = rule.pointwise or all(
            k in LIFTABLE for side in rule.sides() for k in side.kinds()
        )
        for frm, to, label in (
            (rule.src, rule.dst, rule.name),
            (rule.dst, rule.src, f"{rule.name}'"),
        ):
            reason = _skip_reason(frm, to)
            if reason is not None:
                out.untranslated.append(Untranslated(label, reason))
                continue
            ranks = _ranks(rule, frm)
            if rule.pointwise:
                batches = [0]
            elif liftable:
                batches = [
                    b
                    for b in range(top + 1)
                    if ranks and all(r + b in graph_ranks for r in ranks)
                ]
            else:
                batches = [0] if all(r in graph_ranks for r in ranks) else []
            rhs = _rhs_only(frm)
            for b in batches:
                needs, gives = _signatures(rule, frm, b), _signatures(rule, to, b)
                candidates.append(_Candidate(rule, frm, to, label, b, needs, gives))
                if b > 0 and rhs and not rule.pointwise:
                    # Weights shared by every batch element (x·W with x batched).
                    candidates.append(
                        _Candidate(rule, frm, to, label, b, needs, gives, rhs)
                    )
    if graph_keys is not None:
        have = set(graph_keys)
        enabled: set[int] = set()
        changed = True
        while changed:
            changed = False
            for i, cand in enumerate(candidates):
                if i not in enabled and cand.needs <= have:
                    enabled.add(i)
                    have |= cand.gives
                    changed = True
        candidates = [c for i, c in enumerate(candidates) if i in enabled]
    failed: set[str] = set()
    for cand in candidates:
        if cand.label in failed:
            continue
        via = len(out.labels)
        name = cand.label if cand.batch == 0 else f"{cand.label}@b{cand.batch}"
        if cand.unbatched:
            name += "/w"
        try:
            text = _Direction(
                cand.rule, cand.frm, cand.to, cand.batch, keys, via, cand.unbatched
            ).translate(name)
        except EncodeError as e:
            if cand.unbatched:
                continue
            out.untranslated.append(Untranslated(cand.label, str(e)))
            failed.add(cand.label)
            continue
        out.labels.append(cand.label)
        out.rules.append(text)
        if is_multi(cand.frm):
            out.multi += 1
    return out


def _rhs_only(pattern: Pattern) -> frozenset[int]:
    """Inputs used only as the right operand of matmuls (weights)."""
    uses: dict[int, set[tuple[str, int]]] = {}
    for op in pattern.ops:
        for p, r in enumerate(op.operands):
            if r[0] == INPUT:
                uses.setdefault(r[1], set()).add((op.kind, p))
    return frozenset(k for k, u in uses.items() if u == {("matmul", 1)})


def _skip_reason(frm: Pattern, to: Pattern) -> str | None:
    if not to.used_inputs() <= frm.used_inputs():
        return "the new side reads inputs the matched side does not bind"
    if any(r[0] == INPUT for r in frm.outputs):
        return "an output of the matched side is an input (it would match every value)"
    if any(op.kind == "const" for op in to.ops) and not any(
        op.kind == "const" for op in frm.ops
    ):
        return (
            "it introduces an identity constant the graph does not hold (an extra "
            "matmul or conv, never cheaper)"
        )
    return None


__all__ = [
    "PRELUDE",
    "EncodeError",
    "Keys",
    "RuleSet",
    "Untranslated",
    "encode_graph",
    "translate_rules",
]
