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
