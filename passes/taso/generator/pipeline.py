"""
TASO's substitution generator end to end (`generate_rules`): enumeration, the exact
re-test, the prunings and generalization, with counts and times per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from plmr.errors import PlmrError
from plmr.passes.taso.generator.enumeration import Array, Enumerator, GraphOps, InputSpec
from plmr.passes.taso.generator.generalization import (
    GeneralizeError,
    generalize,
    generalized_key,
)
from plmr.passes.taso.generator.pruning import abstract_constants as _abstract_constants
from plmr.passes.taso.generator.pruning import (
    degenerate_reason,
    has_common_subgraph,
    has_common_supergraph,
    merged_instances,
    renaming_key,
    to_pattern,
)
from plmr.passes.taso.ops import (
    SUBSTITUTION_KINDS,
    Shape,
)
from plmr.passes.taso.rules import Pattern, Rule
from plmr.passes.taso.semantics import ArrayOps, eval_pattern


@dataclass
class GenerationReport:
    """What a generation run did: counts after each step, times and the rules."""

    kinds: tuple[str, ...]
    max_ops: int
    counts: list[tuple[str, int]] = field(default_factory=lambda: list[tuple[str, int]]())
    times: list[tuple[str, float]] = field(
        default_factory=lambda: list[tuple[str, float]]()
    )
    rules: list[Rule] = field(default_factory=lambda: list[Rule]())

    def lines(self) -> list[str]:
        out = [
            f"rule generation: ops {', '.join(self.kinds)}; graphs of up to {self.max_ops} ops"
        ]
        width = max(len(name) for name, _ in self.counts)
        for name, count in self.counts:
            out.append(f"  {name:<{width}}  {count:>9}")
        out.append(
            "  time: "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.times)
            + f"; total {sum(s for _, s in self.times):.1f} s"
        )
        return out


def _exact_inputs(
    shapes: Sequence[Shape], rng: np.random.Generator, scale: int
) -> list[Array]:
    choices = np.array([-3, -2, -1, 1, 2, 3])
    return [rng.choice(choices, size=s).astype(np.float64) * scale for s in shapes]


def _exact_outputs(pattern: Pattern, args: Sequence[Array]) -> list[Array]:
    out = eval_pattern(pattern, args, ArrayOps(3.0))
    if all(np.abs(a).max(initial=0) < 2.0**50 for a in out):
        return out
    return eval_pattern(
        pattern, [a.astype(np.int64).astype(object) for a in args], ArrayOps(3, object)
    )


def _avg_pools(*patterns: Pattern) -> int:
    return sum(
        1 for p in patterns for op in p.ops if op.kind == "pool" and op.params[0] == "avg"
    )


class ExactTrials:
    """Fixed random exact-integer inputs for re-tests (multiples of 9^k for k avg-pools)."""

    def __init__(self, shapes: Sequence[Shape], rng: np.random.Generator, trials: int = 2):
        self.shapes = list(shapes)
        self.rng = rng
        self.trials = trials
        self._cache: dict[tuple[int, int], list[list[Array]]] = {}

    def inputs(self, scale: int, extra: Sequence[Shape] = ()) -> list[list[Array]]:
        key = (scale, len(extra))
        if key not in self._cache or extra:
            sets = [
                _exact_inputs([*self.shapes, *extra], self.rng, scale)
                for _ in range(self.trials)
            ]
            if extra:
                return sets
            self._cache[key] = sets
        return self._cache[key]


def same_outputs(
    a: Pattern, b: Pattern, trials: ExactTrials, extra: Sequence[Shape] = ()
) -> list[int] | None:
    """For each output of `a`, the equal output of `b` on exact random inputs (or None)."""
    if len(a.outputs) != len(b.outputs):
        return None
    mapping: list[int] | None = None
    for args in trials.inputs(9 ** _avg_pools(a, b), extra):
        oa, ob = _exact_outputs(a, args), _exact_outputs(b, args)
        found: list[int] = []
        free = list(range(len(ob)))
        for x in oa:
            j = next(
                (j for j in free if ob[j].shape == x.shape and np.array_equal(ob[j], x)),
                None,
            )
            if j is None:
                return None
            free.remove(j)
            found.append(j)
        if mapping is not None and found != mapping:
            return None
        mapping = found
    return mapping


def _reorder(p: Pattern, mapping: Sequence[int]) -> Pattern:
    return Pattern(p.ops, tuple(p.outputs[j] for j in mapping))


def _quiet(_: str) -> None:
    pass


def generate_rules(
    max_ops: int = 3,
    kinds: Sequence[str] = SUBSTITUTION_KINDS,
    seed: int = 0,
    verify_trials: int = 3,
    progress: Callable[[str], None] | None = None,
    inputs: Sequence[InputSpec] | None = None,
) -> GenerationReport:
    """
    Runs the whole generator and returns the verified, pruned, generalized rules
    (`inputs` replaces the enumeration's input tensors, e.g. to make a small run).
    """
    from plmr.passes.taso.verifier import random_test

    unknown = sorted(set(kinds) - set(SUBSTITUTION_KINDS))
    if unknown:
        raise PlmrError(
            f"unknown op(s) {', '.join(unknown)} for rule generation; choose from "
            f"{', '.join(SUBSTITUTION_KINDS)}"
        )
    if not kinds:
        raise PlmrError("rule generation needs at least one op")
    if not 1 <= max_ops <= 3:
        raise PlmrError(
            f"the number of ops per graph must be between 1 and 3, got {max_ops} "
            "(3 already enumerates over a million graphs; TASO's generator stops there)"
        )
    kinds = tuple(k for k in SUBSTITUTION_KINDS if k in kinds)
    report = GenerationReport(kinds, max_ops)
    say = progress if progress is not None else _quiet

    clock = time.perf_counter()
    enum = Enumerator(kinds, max_ops, seed, inputs)
    result = enum.run()
    report.counts.append(("graphs enumerated", result.graphs))
    report.counts.append(("fingerprint groups (>1 graph)", result.groups))
    report.counts.append(("candidate substitutions", len(result.candidates)))
    report.times.append(("enumeration", time.perf_counter() - clock))
    say(f"enumerated {result.graphs} graphs in {result.seconds:.1f} s")

    clock = time.perf_counter()
    templates, specs = enum.templates, enum.inputs
    trials = ExactTrials([s.shape for s in specs], np.random.default_rng(seed + 1))
    tested: list[tuple[Pattern, Pattern]] = []
    sides: dict[GraphOps, Pattern] = {}
    for a, b in result.candidates:
        pa = sides.get(a)
        if pa is None:
            pa = sides[a] = to_pattern(templates, specs, a)
        pb = to_pattern(templates, specs, b)
        mapping = same_outputs(pa, pb, trials)
        if mapping is None:
            continue
        pb = _reorder(pb, mapping)
        tested.append((pa, pb) if len(pa.ops) >= len(pb.ops) else (pb, pa))
    del sides
    report.counts.append(("pass exact re-test (real relu/max)", len(tested)))
    report.times.append(("re-test", time.perf_counter() - clock))
    say(f"{len(tested)} candidates pass the exact re-test")

    clock = time.perf_counter()
    classes = [(s.shape, s.weight) for s in specs]
    seen: set[str] = set()
    unique: list[tuple[str, Pattern, Pattern]] = []
    for src, dst in tested:
        key = renaming_key(src, dst, classes)
        if key not in seen:
            seen.add(key)
            unique.append((key, src, dst))
    derivable: set[str] = set()
    for _, src, dst in unique:
        for s2, d2 in merged_instances(src, dst, classes):
            derivable.add(renaming_key(s2, d2, classes))
    renamed = [(s, d) for key, s, d in unique if key not in derivable]
    report.counts.append(("after input renaming", len(renamed)))

    common = [
        (s, d)
        for s, d in renamed
        if not has_common_subgraph(s, d) and not has_common_supergraph(s, d)
    ]
    report.counts.append(("after common sub/supergraph", len(common)))

    weights = frozenset(i for i, spec in enumerate(specs) if spec.weight)
    sound: list[tuple[Pattern, Pattern]] = []
    for s, d in common:
        if degenerate_reason(s, d, weights) is not None:
            continue
        abstract = _abstract_constants(s, d, len(specs))
        if abstract is not None:
            s2, d2, extra = abstract
            if same_outputs(s2, d2, trials, extra) is not None:
                continue  # the constants are plain operands: a rule with inputs covers it
        sound.append((s, d))
    report.counts.append(("after degenerate rules", len(sound)))

    general: list[Rule] = []
    seen = set()
    for s, d in sound:
        try:
            rule = generalize(s, d, specs, "rule")
        except GeneralizeError:
            continue
        key = generalized_key(rule)
        if key not in seen:
            seen.add(key)
            general.append(rule)
    report.counts.append(("after shape generalization", len(general)))
    report.times.append(("pruning", time.perf_counter() - clock))

    clock = time.perf_counter()
    verified = [r for r in general if random_test(r, trials=verify_trials, seed=seed).ok]
    report.counts.append(("verified at several sizes", len(verified)))
    report.times.append(("verification", time.perf_counter() - clock))

    verified.sort(
        key=lambda r: (
            len(r.src.outputs),
            len(r.src.ops) + len(r.dst.ops),
            [*r.src.kinds(), "|", *r.dst.kinds()],
            generalized_key(r),
        )
    )
    report.rules = [
        Rule(f"rule_{i + 1}", r.inputs, r.src, r.dst, r.symbols, r.pointwise)
        for i, r in enumerate(verified)
    ]
    return report
