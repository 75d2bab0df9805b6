"""plmr registers with xDSL through the `xdsl.universe` entry point without clashes."""

from xdsl.universe import XDSL_UNIVERSE, Universe

from plmr.dialects import get_all_dialects
from plmr.passes import get_all_passes
from plmr.universe import PLMR_UNIVERSE


def test_multiverse_loads_xdsl_and_plmr_together():
    # Raises ValueError("Duplicate definition of ...") on any name clash.
    multiverse = Universe.get_multiverse()
    for name in PLMR_UNIVERSE.all_dialects:
        assert name in multiverse.all_dialects
    for name in PLMR_UNIVERSE.all_passes:
        assert name in multiverse.all_passes
    # xDSL's own dialects are still there.
    for name in ("builtin", "func", "arith", "scf"):
        assert name in multiverse.all_dialects


def test_no_plmr_name_is_an_xdsl_name():
    assert not set(PLMR_UNIVERSE.all_dialects) & set(XDSL_UNIVERSE.all_dialects)
    assert not set(PLMR_UNIVERSE.all_passes) & set(XDSL_UNIVERSE.all_passes)
    assert not set(PLMR_UNIVERSE.all_targets) & set(XDSL_UNIVERSE.all_targets)


def test_every_dialect_factory_loads_a_dialect_of_that_name():
    for name, factory in get_all_dialects().items():
        assert factory().name == name


def test_every_pass_factory_loads_a_pass_of_that_name():
    for name, factory in get_all_passes().items():
        assert factory().name == name


def test_importing_plmr_is_cheap():
    # The dialects load lazily; only the float printer's patch loads with the package, so
    # that xdsl-opt reads and writes plmr's floats bit for bit.
    import subprocess
    import sys

    code = (
        "import sys, plmr, plmr.universe; "
        "print(any(m.startswith('plmr.dialects.') and m != 'plmr.dialects.float_text' "
        "for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
