"""Host memory: timing mode allocates no data; functional runs that cannot fit are refused."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

from plmr.errors import PlmrError
from plmr.lowering.kernels import gemm
from plmr.runtime.memory import check_host_memory, functional_bytes
from plmr.runtime.mesh_machine import find_program, run_mesh
from plmr.tools.cli import cli

BIG = "wse2:sram_kib=1000000"
"""SRAM large enough for blocks of tens of MB (the runtime checks SRAM first)."""


def test_timing_mode_allocates_no_data() -> None:
    # 8192² fp32 matrices are 256 MiB each on the host and 4 MiB per PE.
    kernel = gemm("meshgemm", 8192, 8192, 8192, (4, 4), BIG)
    inputs = [np.broadcast_to(np.float32(0), s) for s in kernel.inputs]
    tracemalloc.start()
    try:
        _, report = run_mesh(kernel.module, inputs, mode="timing")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.cycles > 0
    assert peak < 32 * 2**20, f"timing mode allocated {peak:,} B"


def test_functional_bytes_counts_inputs_outputs_and_grid_arrays() -> None:
    kernel = gemm("meshgemm", 64, 32, 48, (4, 4), "wse2")
    need = functional_bytes(find_program(kernel.module, None))
    assert need.inputs == 4 * (64 * 32 + 32 * 48 + 64 * 48)
    # The GEMM nest holds A, B and C over the grid (blocks of 16x8, 8x12, 16x12).
    assert need.spmd >= 4 * 16 * (16 * 8 + 8 * 12 + 16 * 12)


def test_functional_run_that_does_not_fit_is_refused_up_front() -> None:
    kernel = gemm("meshgemm", 64, 64, 64, (4, 4), "wse2")
    program = find_program(kernel.module, None)
    need = functional_bytes(program).total
    with pytest.raises(PlmrError, match=f"needs at least {need:,} B .*--mode timing"):
        check_host_memory(program, "functional", available=need - 1)
    check_host_memory(program, "functional", available=need)
    check_host_memory(program, "timing", available=0)


def test_bench_refuses_a_functional_gemm_larger_than_memory() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "bench", "gemm", "--grid", "1x1", "--m", "100000", "--k", "100000",
            "--n", "100000", "--mode", "functional",
        ],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "needs at least 240,000,000,000 B" in result.output


def test_bench_timing_gemm_of_huge_sizes_is_a_clear_error() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "gemm",
            "--grid",
            "1x1",
            "--m",
            "100000",
            "--k",
            "100000",
            "--n",
            "100000",
        ],
    )
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "SRAM overflow" in result.output
