"""
`benchmarks/partition.py --quick`: the partitioning benchmark's markdown has a row per
algorithm in each section, and MeshGEMM beats Cannon on a 2K GEMM on 360×360 PEs.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "partition.py"


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every markdown table row (header and rule rows included)."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|")
    ]


def cycles(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_partition_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    namespace = runpy.run_path(str(SCRIPT), run_name="partition_bench")
    main = cast(Callable[[Sequence[str]], int], namespace["main"])
    out = tmp_path / "partition.md"
    kernels = tmp_path / "kernels.md"
    assert (
        main(["--quick", "--jobs", "1", "--out", str(out), "--kernels", str(kernels)]) == 0
    )
    markdown = out.read_text()
    assert capsys.readouterr().out == markdown
    for heading in ("### GEMM", "### GEMV", "### KV cache"):
        assert heading in markdown
    rows = table_rows(markdown)
    by_key = {tuple(r[:3]): r for r in rows if len(r) > 3}

    gemm = {a: by_key[("2K", "360×360", a)] for a in ("meshgemm", "cannon")}
    summa = by_key[("2K", "360×360", "summa (relayed)")]
    assert not any(c.startswith("rejected") for c in [*gemm["cannon"], *summa])
    assert cycles(gemm["meshgemm"][3]) < cycles(gemm["cannon"][3])
    assert cycles(gemm["meshgemm"][5]) < cycles(gemm["cannon"][5])  # exposed comm
    assert float(gemm["cannon"][7].rstrip("x")) > 1.0  # MeshGEMM speedup

    for algorithm in ("ktree", "pipeline", "ring"):
        row = by_key[("16K", "120×120", algorithm)]
        assert row[4].endswith("µs")
    ktree = by_key[("16K", "120×120", "ktree")]
    pipeline = by_key[("16K", "120×120", "pipeline")]
    assert cycles(ktree[3]) < cycles(pipeline[3])

    kv = [r for r in rows if r[0] in ("llama3-8b", "llama2-13b")]
    assert [(r[0], r[1]) for r in kv] == [
        ("llama3-8b", "360×360"),
        ("llama2-13b", "360×360"),
        ("llama2-13b", "375×375"),
    ]
    llama3 = kv[0]
    assert cycles(llama3[6]) == 360 * cycles(llama3[5])  # shift = P rows × concat
    assert "| figure | WaferLLM | model | why they differ |" in markdown

    # The kernels tables repeat the same runs' cycles, with their colors per router.
    same = {tuple(r[:3]): r for r in table_rows(kernels.read_text()) if len(r) > 3}
    assert same[("meshgemm", "360×360", "2048")][3] == gemm["meshgemm"][3]
    assert same[("summa (relayed)", "360×360", "2048")][3] == summa[3]
    assert same[("ktree", "120×120", "16384")][3] == ktree[3]
    assert int(same[("ktree", "120×120", "16384")][6]) >= 1
