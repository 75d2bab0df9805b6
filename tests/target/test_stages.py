"""
Pipeline stages by SRAM: the fewest stages whose layers fit beside the working set, split
as evenly as possible; a layer that does not fit alone is one error.
"""

from __future__ import annotations

import pytest

from plmr.errors import PlmrError
from plmr.target.stages import split_stages


def test_all_layers_fit_one_stage():
    assert split_stages(4, 1000, 2000, 48 * 1024, "m") == (4,)


def test_the_fewest_stages_split_evenly_larger_first():
    # 10 KB free: 3 layers of 3 KB a stage, so 7 layers take 3 stages of 3, 2, 2.
    assert split_stages(7, 3000, 2000, 12000, "m") == (3, 2, 2)
    assert split_stages(32, 10_000, 8_000, 48 * 1024, "m") == (4,) * 8


@pytest.mark.parametrize("n", [1, 2, 5, 16, 33])
@pytest.mark.parametrize("layer", [500, 1000, 4096])
def test_every_stage_fits_and_one_fewer_would_not(n: int, layer: int):
    sram, reserved = 16384, 3000
    groups = split_stages(n, layer, reserved, sram, "m")
    assert sum(groups) == n
    assert max(groups) - min(groups) <= 1
    assert all(g * layer + reserved <= sram for g in groups)
    if len(groups) > 1:
        assert -(-n // (len(groups) - 1)) * layer + reserved > sram


def test_a_layer_that_does_not_fit_alone_is_one_error():
    with pytest.raises(PlmrError, match=r"the model: one layer's weights need 5000 B"):
        split_stages(3, 5000, 4000, 8192, "the model")
