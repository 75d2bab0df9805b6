"""The loop program generator: valid, runnable, reproducible, all nest kinds."""

from plmr.dialects import loop
from plmr.dialects.printing import module_text
from plmr.runtime.running import random_inputs, run_function, select_function
from plmr.validate.fuzz.loop_gen import generate_loop


def test_programs_verify_and_run():
    kinds: set[str] = set()
    for seed in range(40):
        module = generate_loop(seed)
        fn = select_function(module, None)
        run_function(module, fn, random_inputs(fn, 0))
        for op in module.walk():
            if isinstance(op, loop.NestOp):
                kinds.add("reduction" if op.reduction_dims else "map")
    assert kinds == {"map", "reduction"}


def test_same_seed_same_program():
    assert module_text(generate_loop(3)) == module_text(generate_loop(3))


def test_tile_programs_are_blocked_loop_programs():
    from plmr.dialects import tile
    from plmr.validate.fuzz.loop_gen import generate_tile

    for seed in range(10):
        module = generate_tile(seed)
        assert any(isinstance(op, tile.ForOp) for op in module.walk())
        assert not any(isinstance(op, loop.NestOp) for op in module.walk())
        fn = select_function(module, None)
        run_function(module, fn, random_inputs(fn, 0))


def test_special_programs_carry_special_values_and_run():
    """Masks, infinities, NaN and reductions from -inf: in the text and in the results."""
    import numpy as np

    from plmr.validate.fuzz.loop_gen import generate_tile

    seen: set[str] = set()
    nonfinite_results = 0
    for seed in range(60):
        module = generate_loop(seed, special=True)
        text = module_text(module)
        for name, pattern in (
            ("-inf", "0xFF800000"),
            ("inf", "0x7F800000"),
            ("nan", "0x7FC00000"),
            ("mask", "%mask"),
            ("-0.0", "-0.000000e+00"),
            ("finfo.min", "-3.4028235e+38"),
        ):
            if pattern.lower() in text.lower():
                seen.add(name)
        fn = select_function(module, None)
        results = run_function(module, fn, random_inputs(fn, 0))
        if any(not np.isfinite(np.asarray(r)).all() for r in results):
            nonfinite_results += 1
    assert seen == {"-inf", "inf", "nan", "mask", "-0.0", "finfo.min"}, seen
    assert nonfinite_results > 0
    for seed in range(10):
        module = generate_tile(seed, special=True)
        fn = select_function(module, None)
        run_function(module, fn, random_inputs(fn, 0))


def test_special_is_off_by_default():
    assert "%mask" not in "".join(module_text(generate_loop(s)) for s in range(20))
    assert module_text(generate_loop(5)) != module_text(generate_loop(5, special=True))
