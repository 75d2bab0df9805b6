"""Device presets and parameter overrides."""

import pytest

from plmr.errors import PlmrError
from plmr.target.device import PRESETS, WSE2, WSE3, get_device


def test_presets_match_the_published_figures():
    assert (WSE2.width, WSE2.height, WSE2.cores) == (750, 994, 745_500)
    assert WSE2.sram_bytes == 48 * 1024
    assert WSE2.clock_hz == 1.1e9
    assert (WSE2.fmac_fp16, WSE3.fmac_fp16) == (4, 8)
    assert WSE2.colors == 24
    assert WSE2.link_bytes_per_cycle == 4
    assert WSE2.usable_colors == 21


def test_overrides_convert_units_and_keep_the_rest():
    d = get_device("wse2:colors=16,sram_kib=24,clock_ghz=0.85")
    assert (d.colors, d.sram_bytes, d.clock_hz) == (16, 24 * 1024, 0.85e9)
    assert d.fmac_fp16 == WSE2.fmac_fp16
    assert get_device("wse3") is PRESETS["wse3"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("wse9", "unknown device 'wse9'; presets: wse2, wse3"),
        ("wse2:bogus=1", "unknown device parameter(s) bogus"),
        ("wse2:colors", "bad device override 'colors'"),
        ("wse2:colors=many", "device parameter colors must be a int, got 'many'"),
        ("wse2:width=0", "width must be positive"),
        ("wse2:reserved_colors=24", "reserved_colors (24) must be below colors (24)"),
        ("wse2:hop_cycles=-1", "hop_cycles must be >= 0"),
        ("wse2:send_overhead_cycles=-0.5", "send_overhead_cycles must be >= 0"),
    ],
)
def test_bad_specs_are_clear_errors(spec: str, message: str):
    with pytest.raises(PlmrError) as info:
        get_device(spec)
    assert message in str(info.value)
