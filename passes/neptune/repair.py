"""
The repair of a reduction that reads an unfinished one, derived and proved with sympy.

A target reduction accumulates `X_t = X_t ⊕ g(x, u)` where `x` are values of earlier
reductions that are still running when the two are fused (a running max `m`), and `u`
is everything else. Fusing reads `x` too early; Neptune repairs that with a function
`h(t, x, x')` that re-tags a partial result `t` computed with the old `x` as if it had
been computed with the new `x'`:

    (3)  h(g(x, u), x, x') = g(x', u)
    (4)  h(a ⊕ b, x, x')   = h(a, x, x') ⊕ h(b, x, x')

The derivation separates `g = gx(x) ∘ gu(u)` with `∘` one of `+`, `·` (every factor or
term reads only `x` or only `u`), inverts `∘` for `gu`, and sets
`h(t, x, x') = gx(x') ∘ gu` with `gu = t ∘⁻¹ gx(x)`. For softmax's sum,
`g = exp(s − m)` gives `h = t·exp(m − m')`.

Every repair is *proved* before it is returned: (3), `h(t, x, x) = t`, composition
`h(h(t, a, b), b, c) = h(t, a, c)` (which blocking needs), and (4) for the combiner:
`+` and `·` by simplifying the difference to zero, `max` / `min` by showing `h` is
non-decreasing in `t` (`∂h/∂t ≥ 0`). When any step fails, `RepairRefused` says why
(e.g. the variance `(x − μ)²` mixes `x` and `μ` in the term `−2xμ`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from plmr.passes.neptune.symbolic import Expr, Symbol, sp

COMBINERS = ("add", "mul", "max", "min")
"""The combiners `⊕` a repair can be proved for."""


class RepairRefused(Exception):
    """No repair exists, or it could not be proved; `reason` says which and why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Repair:
    """A proved repair `h(t, old, new)` for the term `g` under `combiner`."""

    g: Expr
    combiner: str
    old: tuple[Symbol, ...]
    """The unfinished values as the term reads them (`x`)."""
    new: tuple[Symbol, ...]
    """Their next values (`x'`)."""
    t: Symbol
    h: Expr
    separation: str
    """How `g` was separated, e.g. `g = exp(-x0)·exp(u0)` (mul)."""
    proofs: tuple[str, ...]
    """The identities that were proved."""

    @property
    def is_identity(self) -> bool:
        return self.h == self.t

    def substitute(self, t: Expr, old: Sequence[Expr], new: Sequence[Expr]) -> Expr:
        """`h` with `t`, the old and the new values replaced."""
        mapping: dict[Symbol, Expr] = {self.t: t}
        mapping.update(zip(self.old, old, strict=True))
        mapping.update(zip(self.new, new, strict=True))
        return self.h.xreplace(mapping)


def _real(name: str) -> Symbol:
    return sp.Symbol(name, real=True)


def _combine(kind: str) -> Callable[[Expr, Expr], Expr]:
    if kind == "add":
        return lambda a, b: a + b
    return lambda a, b: a * b


def separate(g: Expr, xs: Sequence[Symbol]) -> tuple[str, Expr, Expr] | None:
    """
    Writes `g` as `gx ∘ gu` (`∘` = `add` or `mul`) where `gx` reads only `xs` and `gu`
    none of them; None when every form tried mixes them.
    """
    x_set = set(xs)
    for e in _forms(g):
        if isinstance(e, sp.Mul):
            kind, parts = "mul", e.args
        elif isinstance(e, sp.Add):
            kind, parts = "add", e.args
        elif e.free_symbols <= x_set:
            return "mul", e, sp.Integer(1)
        else:
            continue
        gx: list[Expr] = []
        gu: list[Expr] = []
        mixed = False
        for p in parts:
            free = p.free_symbols
            if free & x_set and free - x_set:
                mixed = True
                break
            (gx if free & x_set else gu).append(p)
        if mixed or not gx:
            continue
        if kind == "mul":
            return kind, sp.Mul(*gx), sp.Mul(*gu)
        return kind, sp.Add(*gx), sp.Add(*gu)
    return None


def _forms(g: Expr) -> list[Expr]:
    """`g` as written, expanded (exp(a + b) = exp(a)·exp(b)), and factored."""
    forms = [g, sp.expand(g)]
    try:
        forms.append(sp.factor(g))
    except (sp.PolynomialError, NotImplementedError):
        pass
    return forms


@lru_cache(maxsize=4096)
def _is_zero(e: Expr) -> bool:
    """Whether `e` simplifies to 0 (memoised: every blocking trial proves the same laws)."""
    return bool(sp.simplify(e) == 0)


_CACHE: dict[tuple[str, tuple[str, ...], str], Repair] = {}
_LAWS: dict[
    tuple[str, str, tuple[str, ...], tuple[str, ...], str], tuple[str, ...] | str
] = {}
"""The proofs of `check_laws` by term (a string: the reason they failed)."""


def clear_cache() -> None:
    """Forgets the repairs derived and the laws proved so far (memoised by term)."""
    _CACHE.clear()
    _LAWS.clear()


def derive_repair(g: Expr, xs: Sequence[Symbol], combiner: str) -> Repair:
    """
    The proved repair of `X_t = X_t ⊕ g` when the symbols `xs` of `g` are values of
    unfinished reductions (raises `RepairRefused` with the reason otherwise).
    """
    if combiner not in COMBINERS:
        raise RepairRefused(
            f"the combiner '{combiner}' is not one of {', '.join(COMBINERS)}"
        )
    key = (sp.srepr(g), tuple(x.name for x in xs), combiner)
    if key in _CACHE:
        return _CACHE[key]
    repair = _derive(g, tuple(xs), combiner)
    _CACHE[key] = repair
    return repair


def _derive(g: Expr, xs: tuple[Symbol, ...], combiner: str) -> Repair:
    t = _real("t")
    new = tuple(_real(f"{x.name}_new") for x in xs)
    to_new = dict(zip(xs, new, strict=True))
    if not g.free_symbols & set(xs):
        return Repair(g, combiner, xs, new, t, t, "g does not read x", ("h = t",))
    parts = separate(g, xs)
    if parts is None:
        raise RepairRefused(
            f"the term g = {g} cannot be separated into f(x) + f(u) or f(x)*f(u): it "
            f"mixes the unfinished {', '.join(map(str, xs))} with the data"
        )
    kind, gx, gu = parts
    comb = _combine(kind)
    a, b = _real("a"), _real("b")
    solutions = sp.solve(sp.Eq(comb(a, b), t), b)
    if len(solutions) != 1:
        raise RepairRefused(f"the separation of g = {g} has no unique inverse")
    gu_of_t = solutions[0].xreplace({a: gx})
    h = sp.simplify(comb(gx.xreplace(to_new), gu_of_t))
    separation = f"g = ({gx}) {'+' if kind == 'add' else '*'} ({gu})"
    proofs = _prove(g, xs, new, t, h, combiner)
    return Repair(g, combiner, xs, new, t, h, separation, proofs)


def check_laws(
    h: Expr,
    t: Symbol,
    old: Sequence[Symbol],
    new: Sequence[Symbol],
    combiner: str,
) -> tuple[str, ...]:
    """
    Proves what blocking a repaired reduction needs of a given `h(t, old, new)`: the
    identity, composition and distributivity over `combiner` (raises `RepairRefused`).
    The outcome is memoised by term: every blocking trial asks again for the same `h`.
    """
    if combiner not in COMBINERS:
        raise RepairRefused(
            f"the combiner '{combiner}' is not one of {', '.join(COMBINERS)}"
        )
    key = (
        sp.srepr(h),
        sp.srepr(t),
        tuple(sp.srepr(x) for x in old),
        tuple(sp.srepr(x) for x in new),
        combiner,
    )
    known = _LAWS.get(key)
    if known is None:
        try:
            known = _laws(tuple(old), tuple(new), t, h, combiner)
        except RepairRefused as e:
            known = e.reason
        _LAWS[key] = known
    if isinstance(known, str):
        raise RepairRefused(known)
    return known


def _prove(
    g: Expr,
    xs: tuple[Symbol, ...],
    new: tuple[Symbol, ...],
    t: Symbol,
    h: Expr,
    combiner: str,
) -> tuple[str, ...]:
    """Proves the properties a repair needs; raises `RepairRefused` if one fails."""
    to_new = dict(zip(xs, new, strict=True))
    proofs: list[str] = []
    if not _is_zero(h.xreplace({t: g}) - g.xreplace(to_new)):
        raise RepairRefused(f"h = {h} does not re-tag g = {g} (h(g(x), x, x') != g(x'))")
    proofs.append("h(g(x, u), x, x') = g(x', u)")
    return (proofs[0], *_laws(xs, new, t, h, combiner))


def _laws(
    xs: tuple[Symbol, ...],
    new: tuple[Symbol, ...],
    t: Symbol,
    h: Expr,
    combiner: str,
) -> tuple[str, ...]:
    proofs: list[str] = []
    if not _is_zero(h.xreplace(dict(zip(new, xs, strict=True))) - t):
        raise RepairRefused(f"h = {h} is not the identity when x does not change")
    proofs.append("h(t, x, x) = t")
    third = tuple(_real(f"{x.name}_next") for x in xs)
    once = h.xreplace(dict(zip(new, third, strict=True)))
    # Simultaneous: the inner h (with x, x') replaces t; the outer x, x' become x', x''.
    outer: dict[Expr, Expr] = {t: h}
    outer.update(zip(xs, new, strict=True))
    outer.update(zip(new, third, strict=True))
    twice = h.xreplace(outer)
    if not _is_zero(twice - once):
        raise RepairRefused(f"h = {h} does not compose (h(h(t, a, b), b, c) != h(t, a, c))")
    proofs.append("h(h(t, a, b), b, c) = h(t, a, c)")
    y1, y2 = _real("y1"), _real("y2")

    def at(v: Expr) -> Expr:
        return h.xreplace({t: v})

    if combiner == "add":
        ok = _is_zero(at(y1 + y2) - at(y1) - at(y2))
        law = "h(a + b) = h(a) + h(b)"
    elif combiner == "mul":
        ok = _is_zero(at(y1 * y2) - at(y1) * at(y2))
        law = "h(a * b) = h(a) * h(b)"
    else:
        slope = sp.simplify(sp.diff(h, t))
        ok = bool(slope.is_nonnegative)
        law = f"h is non-decreasing in t (dh/dt = {slope} >= 0), so h({combiner}(a, b)) = {combiner}(h(a), h(b))"
    if not ok:
        raise RepairRefused(
            f"the repair h = {h} does not distribute over {combiner} (the proof failed), "
            "so partial results cannot be repaired"
        )
    proofs.append(law)
    return tuple(proofs)
