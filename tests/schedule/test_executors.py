"""Executors: the same seed gives the same trials in processes and as Ray tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plmr.dialects.context import load_module
from plmr.dialects.printing import module_text
from plmr.schedule.db import PerfDB
from plmr.schedule.executors import ProcessExecutor, RayExecutor
from plmr.schedule.transforms import Compound, Fuse, Partition, Tile, choice
from plmr.schedule.tuner import tune

MLP = Path(__file__).resolve().parents[2] / "examples" / "onnx" / "mlp.mlir"


def _space() -> Compound:
    return Compound(
        [
            Fuse("auto"),
            Tile(
                parallel=choice(2, 4, 8, 32),
                reduction=choice(4, 16),
                nests={"MatMul_3_out": [choice(2, 4, 8), choice(4, 16)]},
            ),
            Partition(grid=[2, 2], gemm=choice("meshgemm", "cannon", "summa")),
        ]
    )


def _trials(executor: Any, path: Path) -> list[tuple[str, str, float | None]]:
    with PerfDB(path) as db:
        tune(
            module_text(load_module(MLP)),
            "mlp",
            _space(),
            trials=10,
            db=db,
            sampler="evolutionary",
            seed=5,
            executor=executor,
        )
        records = db.trials()
    return [(json.dumps(r.schedule, sort_keys=True), r.status, r.cycles) for r in records]


def test_process_and_ray_executors_give_identical_trial_lists(
    tmp_path: Path, ray_session: Any
):
    del ray_session
    inline = _trials(ProcessExecutor(1), tmp_path / "a.sqlite")
    pool = ProcessExecutor(2)
    try:
        processes = _trials(pool, tmp_path / "b.sqlite")
    finally:
        pool.close()
    ray = RayExecutor(1)
    try:
        on_ray = _trials(ray, tmp_path / "c.sqlite")
    finally:
        ray.close()  # joined the session's instance: leaves it running
    assert len(inline) == 1 + 10
    assert inline == processes == on_ray


def test_executors_keep_submission_order():
    pool = ProcessExecutor(2)
    try:
        assert list(pool.run(pow, [(2, i) for i in range(6)])) == [1, 2, 4, 8, 16, 32]
    finally:
        pool.close()
