"""
`plmr demo`: the bundled end-to-end check of the front end.

Every ONNX model under `examples/onnx/` is imported into the `graph` dialect, run with
plmr's reference semantics on random inputs, and compared with ONNX's own
`ReferenceEvaluator` on the same inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from plmr.runtime.reference import Array

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "onnx"

RTOL = 1e-4


def example_models() -> list[Path]:
    return sorted(EXAMPLES.glob("*.onnx"))


def max_relative_error(got: Array, want: Array) -> float:
    """max |got - want| / max(|want|, 1): a relative error that tolerates zeros."""
    if got.shape != want.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    return float(np.max(np.abs(g - w) / np.maximum(np.abs(w), 1.0)))


def onnx_outputs(path: Path, feeds: dict[str, Array]) -> list[Array]:
    import onnx
    from onnx.reference import ReferenceEvaluator

    load = cast(Callable[[str], Any], getattr(onnx, "load"))
    evaluator = ReferenceEvaluator(load(str(path)))
    run = cast(Callable[[None, dict[str, Array]], list[Any]], getattr(evaluator, "run"))
    return [np.asarray(o) for o in run(None, feeds)]


def run_demo(seed: int, echo: Callable[[str], None]) -> bool:
    """Runs every bundled model; prints a table; True when all match."""
    from plmr.tools.onnx_import import import_onnx_file
    from plmr.tools.running import arg_names, random_inputs, run_function, select_function

    models = example_models()
    if not models:
        echo(f"no ONNX models found in {EXAMPLES}")
        return False
    echo(f"plmr demo: ONNX -> graph dialect -> reference semantics, vs onnx (seed {seed})")
    header = f"{'model':<20} {'graph ops':>9} {'outputs':>7} {'max rel err':>12} {'time':>8}  check"
    echo(header)
    echo("-" * len(header))
    ok = True
    for path in models:
        start = time.perf_counter()
        module = import_onnx_file(str(path))
        fn = select_function(module, None)
        args = random_inputs(fn, seed)
        got = run_function(module, fn, args)
        elapsed = time.perf_counter() - start
        want = onnx_outputs(path, dict(zip(arg_names(fn), args, strict=True)))
        err = max(
            (max_relative_error(g, w) for g, w in zip(got, want, strict=True)), default=0.0
        )
        passed = len(got) == len(want) and err <= RTOL
        ok = ok and passed
        n_ops = sum(1 for op in fn.walk() if op.name.startswith("graph."))
        echo(
            f"{path.stem:<20} {n_ops:>9} {len(got):>7} {err:>12.2e} "
            f"{elapsed * 1e3:>6.0f}ms  {'ok' if passed else 'MISMATCH'}"
        )
    echo(f"{'all outputs equal ONNX within' if ok else 'MISMATCH above rtol'} {RTOL:g}")
    return ok
