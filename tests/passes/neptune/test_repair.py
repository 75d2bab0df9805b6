"""
Tests of the repair derivation (`plmr.passes.neptune.repair`): the repairs it proves
(softmax's sum, attention's P·V, a running max of shifted values, several unfinished
values at once) and the terms it must refuse (a variance with a running mean, an
additive repair under a sum, a repair under a product).
"""

import pytest

from plmr.passes.neptune.repair import (
    RepairRefused,
    check_laws,
    clear_cache,
    derive_repair,
    separate,
)
from plmr.passes.neptune.symbolic import sp


def sym(name: str):
    return sp.Symbol(name, real=True)


m, s, v, l_, mu, x = (sym(n) for n in ("m", "s", "v", "l", "mu", "x"))


def test_softmax_sum_repair_is_exp_of_the_max_change():
    r = derive_repair(sp.exp(s - m), [m], "add")
    (m_new,) = r.new
    assert sp.simplify(r.h - r.t * sp.exp(m - m_new)) == 0
    assert "h(a + b) = h(a) + h(b)" in r.proofs
    assert "h(g(x, u), x, x') = g(x', u)" in r.proofs


def test_attention_pv_repair_ignores_the_value_factor():
    r = derive_repair(sp.exp(s - m) * v, [m], "add")
    assert sp.simplify(r.h - r.t * sp.exp(m - r.new[0])) == 0


def test_several_unfinished_values():
    r = derive_repair(sp.exp(s - m) * v / l_, [m, l_], "add")
    m_new, l_new = r.new
    assert sp.simplify(r.h - r.t * sp.exp(m - m_new) * l_ / l_new) == 0


def test_running_max_of_shifted_values_uses_an_additive_repair():
    r = derive_repair(s - m, [m], "max")
    assert sp.simplify(r.h - (r.t + m - r.new[0])) == 0
    assert any("non-decreasing" in p for p in r.proofs)


def test_no_unfinished_value_needs_no_repair():
    assert derive_repair(sp.exp(s), [m], "add").is_identity


def test_variance_with_a_running_mean_is_refused():
    with pytest.raises(RepairRefused, match="cannot be separated"):
        derive_repair((x - mu) ** 2, [mu], "add")


def test_additive_repair_does_not_distribute_over_a_sum():
    with pytest.raises(RepairRefused, match="does not distribute over add"):
        derive_repair(s - m, [m], "add")


def test_multiplicative_repair_does_not_distribute_over_a_product():
    with pytest.raises(RepairRefused, match="does not distribute over mul"):
        derive_repair(s * sp.exp(-m), [m], "mul")


def test_unknown_combiner_is_refused():
    with pytest.raises(RepairRefused, match="not one of"):
        derive_repair(sp.exp(s - m), [m], "xor")


def test_separation_forms():
    assert separate(sp.exp(s - m) * v, [m]) is not None
    assert separate((x - mu) ** 2, [mu]) is None


def test_check_laws_accepts_the_softmax_repair_and_rejects_a_wrong_one():
    t, a, b = sym("t"), sym("a"), sym("b")
    assert check_laws(t * sp.exp(a - b), t, [a], [b], "add")
    with pytest.raises(RepairRefused, match="identity"):
        check_laws(t * sp.exp(a + b), t, [a], [b], "add")


def test_derivations_are_memoised():
    clear_cache()
    first = derive_repair(sp.exp(s - m), [m], "add")
    assert derive_repair(sp.exp(s - m), [m], "add") is first


def test_laws_are_memoised_and_a_refusal_stays_a_refusal():
    t, a, b = sym("t"), sym("a"), sym("b")
    clear_cache()
    first = check_laws(t * sp.exp(a - b), t, [a], [b], "add")
    assert check_laws(t * sp.exp(a - b), t, [a], [b], "add") is first
    for _ in range(2):
        with pytest.raises(RepairRefused, match="identity"):
            check_laws(t * sp.exp(a + b), t, [a], [b], "add")
    # The same term with other assumptions is proved on its own.
    u = sp.Symbol("t")
    assert check_laws(u * sp.exp(a - b), u, [a], [b], "add") is not first
    clear_cache()
