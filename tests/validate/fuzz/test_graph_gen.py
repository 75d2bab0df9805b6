"""The graph program generator: valid, runnable, reproducible, and covering every op."""

from collections import Counter

import numpy as np
from xdsl.dialects.builtin import f32

from plmr.dialects import graph
from plmr.dialects.printing import module_text
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.validate.fuzz.graph_gen import DRAWN_OPS, generate_graph

SEEDS = range(300)


def test_programs_verify_run_and_are_finite():
    for seed in range(60):
        module = generate_graph(seed)
        module.verify()
        fn = select_function(module, None)
        results = run_function(module, fn, random_inputs(fn, 0))
        for r in results:
            if r.dtype.kind == "f":
                assert np.isfinite(r).all(), (seed, module_text(module))


def test_same_seed_same_program():
    assert module_text(generate_graph(7)) == module_text(generate_graph(7))
    assert module_text(generate_graph(7)) != module_text(generate_graph(8))


def test_every_graph_op_is_generated():
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        seen.update(op.name for op in generate_graph(seed).walk())
    # A graph.weight's values live in a file: fuzzed programs are self-contained and hold
    # their constants inline (tests/lowering/test_graph_to_loop.py lowers weights).
    ops = {op.name for op in graph.Graph.operations} - {"graph.weight"}
    missing = sorted(ops - set(seen))
    assert not missing, missing
    undrawn = sorted({op.name for op in DRAWN_OPS} - set(seen))
    assert not undrawn, f"declared in DRAWN_OPS but never drawn: {undrawn}"


def test_special_programs_carry_infinities_nan_masks_and_run():
    """`special` programs hold ±inf, NaN, -0.0, subnormals and additive masks."""
    seen: set[str] = set()
    for seed in range(80):
        module = generate_graph(seed, special=True)
        module.verify()
        fn = select_function(module, None)
        run_function(module, fn, random_inputs(fn, 0))
        for op in module.walk():
            if isinstance(op, graph.ConstantOp) and op.value.get_element_type() == f32:
                values = np.asarray(op.value.get_values(), np.float32)
                seen.update(
                    name
                    for name, hit in (
                        ("nan", np.isnan(values).any()),
                        ("-inf", (values == -np.inf).any()),
                        ("inf", (values == np.inf).any()),
                        ("-0.0", (np.signbit(values) & (values == 0)).any()),
                        ("subnormal", ((values != 0) & (np.abs(values) < 1.2e-38)).any()),
                        ("finfo.min", (values == np.finfo(np.float32).min).any()),
                    )
                    if hit
                )
            if isinstance(op, graph.PadOp) and op.value.value.data == -np.inf:
                seen.add("pad -inf")
            if isinstance(op, graph.AddOp) and any(
                isinstance(v.owner, graph.ConstantOp)
                and np.float32(np.finfo(np.float32).min) in v.owner.value.get_values()
                for v in op.operands
            ):
                # A masked sum is read by its softmax only: sums of its products
                # would overflow in an order-dependent way.
                assert [type(u.operation) for u in op.result.uses] == [graph.SoftmaxOp]
    assert seen == {"nan", "-inf", "inf", "-0.0", "subnormal", "finfo.min", "pad -inf"}


def test_programs_without_special_values_are_unchanged_by_the_option():
    assert module_text(generate_graph(7)) == module_text(generate_graph(7, special=False))
