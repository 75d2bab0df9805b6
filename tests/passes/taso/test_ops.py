"""
The operator keys of the substitutions (`plmr.passes.taso.ops`): typed parameter access
that names the operator and the parameter on a malformed key.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plmr.errors import PlmrError
from plmr.passes.taso.ops import (
    describe,
    infer_shapes,
    param_float,
    param_int,
    param_ints,
    param_str,
    pool_params,
)


def test_accessors_return_typed_parameters():
    params = (1, (2, 3))
    assert param_int("split", params, 0, "axis") == 1
    assert param_ints("split", params, 1, "sizes") == (2, 3)
    assert param_float("scale", (0.5,), 0, "factor") == 0.5
    assert param_str("pool", pool_params("max"), 0, "pool kind") == "max"
    assert infer_shapes("split", params, [(4, 5)]) == [(4, 2), (4, 3)]
    assert describe("transpose", ((1, 0),)) == "transpose[1,0]"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: param_int("concat", ((0, 1),), 0, "axis"), "'concat': parameter 'axis'"),
        (lambda: param_int("concat", (True,), 0, "axis"), "is True, expected an int"),
        (lambda: param_ints("transpose", (1,), 0, "perm"), "expected a tuple of ints"),
        (
            lambda: param_float("scale", (2,), 0, "factor"),
            "'factor' is 2, expected a float",
        ),
        (lambda: param_str("pool", (3,), 0, "pool kind"), "expected a string"),
        (
            lambda: param_ints("split", (0,), 1, "sizes"),
            "no parameter 'sizes' \\(position 1\\)",
        ),
        (
            lambda: infer_shapes("split", (0, 4), [(4, 4)]),
            "'split': parameter 'sizes' is 4",
        ),
    ],
)
def test_a_malformed_key_names_the_operator_and_parameter(
    call: Callable[[], object], message: str
):
    with pytest.raises(PlmrError, match=message):
        call()
