"""TASO's generator: enumeration, fingerprints, pruning steps, generalization."""

import numpy as np
import pytest

from plmr.errors import PlmrError
from plmr.passes.taso.generator import (
    INPUTS_2D,
    Enumerator,
    GeneralizeError,
    Unifier,
    generalize,
    generate_rules,
    has_common_subgraph,
    has_common_supergraph,
    renaming_key,
)
from plmr.passes.taso.rules import INPUT, PatOp, Pattern, describe_pattern
from plmr.passes.taso.semantics import ArrayOps, FingerprintOps


def test_fingerprint_relu_is_taso_polynomial():
    x = np.array([-2, 0, 3], dtype=np.int64)
    assert FingerprintOps(np.int64(3)).relu(x).tolist() == [3, 1, 13]
    assert ArrayOps(3.0).relu(x).tolist() == [0, 0, 3]


def test_fingerprint_avg_pool_is_exact_modulo_2_64():
    ops = FingerprintOps(np.int64(1))
    x = np.full((1, 1, 3, 3), 9, dtype=np.int64)
    # The centre window sums nine 9s: 81 * (1/9 mod 2^64) == 9 exactly.
    assert ops.pool_avg(x)[0, 0, 1, 1] == 9


def test_enumeration_counts_depth_one():
    result = Enumerator(["matmul", "add"], 1).run()
    # matmul: x@w (3*3) + w@w (3*3); add: pairs of equal shape (3 + 3).
    assert result.graphs == 18 + 6
    assert result.candidates == []


@pytest.fixture(scope="module")
def small_report():
    return generate_rules(
        2, ["matmul", "add", "mul", "scale", "relu", "transpose", "concat"]
    )


def test_counts_shrink_along_the_pipeline(small_report):
    counts = dict(small_report.counts)
    order = [n for n, _ in small_report.counts][2:]
    values = [counts[n] for n in order]
    assert values == sorted(values, reverse=True)
    assert counts["candidate substitutions"] > counts["after input renaming"] > 0
    assert len(small_report.rules) == values[-1]
    assert "enumeration" in " ".join(small_report.lines())


def test_finds_associativity_and_scale_through_matmul(small_report):
    texts = {
        f"{describe_pattern(r.src)} => {describe_pattern(r.dst)}"
        for r in small_report.rules
    }
    assert "matmul(matmul(x0, x1), x2) => matmul(x0, matmul(x1, x2))" in texts
    assert "scale(matmul(x0, x1)) => matmul(x0, scale(x1))" in texts
    assert "concat[1](relu(x0), relu(x1)) => relu(concat[1](x0, x1))" not in texts  # 3 ops


def test_rules_are_generalized_to_distinct_symbols(small_report):
    assoc = next(
        r
        for r in small_report.rules
        if describe_pattern(r.src) == "matmul(matmul(x0, x1), x2)"
    )
    assert assoc.inputs == ((2, 4), (4, 5), (5, 6))
    assert assoc.symbols == frozenset({2, 4, 5, 6})


def test_multi_output_rule_of_shared_input_matmuls():
    x1, _, _, w1, w2, _ = INPUTS_2D
    report = generate_rules(3, ["matmul", "concat", "split"], inputs=[x1, w1, w2])
    texts = {
        f"{describe_pattern(r.src)} => {describe_pattern(r.dst)}" for r in report.rules
    }
    assert (
        "(t0#0, t0#1) where t0 = split[1](matmul(x0, concat[1](x1, x2))) => "
        "(matmul(x0, x1), matmul(x0, x2))"
    ) in texts


def test_bad_arguments_are_user_errors():
    with pytest.raises(PlmrError, match="unknown op"):
        generate_rules(2, ["matmul", "softmax"])
    with pytest.raises(PlmrError, match="between 1 and 3"):
        generate_rules(0, ["matmul"])


def _mm(a, b):
    return PatOp("matmul", (False, False), (a, b))


def test_renaming_key_ignores_input_names():
    classes = [(s.shape, s.weight) for s in INPUTS_2D]
    # add(x1, x2) = add(x2, x1) written with inputs 0,1 and with inputs 1,2.
    src1 = Pattern((PatOp("add", (), ((INPUT, 0), (INPUT, 1))),), ((0, 0),))
    dst1 = Pattern((PatOp("mul", (), ((INPUT, 0), (INPUT, 1))),), ((0, 0),))
    src2 = Pattern((PatOp("add", (), ((INPUT, 1), (INPUT, 2))),), ((0, 0),))
    dst2 = Pattern((PatOp("mul", (), ((INPUT, 1), (INPUT, 2))),), ((0, 0),))
    assert renaming_key(src1, dst1, classes) == renaming_key(src2, dst2, classes)
    src3 = Pattern((PatOp("add", (), ((INPUT, 0), (INPUT, 3))),), ((0, 0),))
    assert renaming_key(src3, dst1, classes) != renaming_key(src1, dst1, classes)


def test_common_subgraph_and_supergraph():
    x, w1, w2 = (INPUT, 0), (INPUT, 3), (INPUT, 4)
    shared = Pattern((_mm(x, w1), PatOp("relu", (), ((0, 0),))), ((1, 0),))
    other = Pattern((_mm(x, w1), PatOp("scale", (2.0,), ((0, 0),))), ((1, 0),))
    assert has_common_subgraph(shared, other)
    a = Pattern((PatOp("add", (), (w1, w2)), PatOp("relu", (), ((0, 0),))), ((1, 0),))
    b = Pattern((PatOp("mul", (), (w1, w2)), PatOp("relu", (), ((0, 0),))), ((1, 0),))
    assert not has_common_subgraph(a, b)
    assert has_common_supergraph(a, b)


def test_unifier_binds_sums_and_rejects_empty_sizes():
    u = Unifier()
    a, b, c = u.fresh(), u.fresh(), u.fresh()
    assert u.unify(c, (0, (*a[1], *b[1])))
    assert u.resolve(c) == (0, tuple(sorted(a[1] + b[1])))
    assert u.unify((0, (*a[1], *b[1])), (0, (*a[1], *b[1])))
    # a + b = a would need b = 0.
    assert not u.unify((0, (*a[1], *b[1])), a)


def test_generalize_rejects_sizes_that_are_sums():
    x1, x2 = (INPUT, 0), (INPUT, 1)
    w = (INPUT, 3)
    # add(concat0(x1, x2), w): w's first dimension would be the sum of two symbols.
    src = Pattern(
        (PatOp("concat", (0,), (x1, x2)), PatOp("add", (), ((0, 0), w))), ((1, 0),)
    )
    with pytest.raises(GeneralizeError):
        generalize(src, src, INPUTS_2D, "r")
