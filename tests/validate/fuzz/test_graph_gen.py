"""The graph program generator: valid, runnable, reproducible, and covering every op."""

from collections import Counter

import numpy as np

from plmr.dialects import graph
from plmr.dialects.printing import module_text
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.validate.fuzz.graph_gen import generate_graph

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
