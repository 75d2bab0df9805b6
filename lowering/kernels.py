"""
Kernel library: builders that emit mesh programs for distributed GEMM and GEMV.

GEMM (C = A·B, A: M×K, B: K×N):
- `meshgemm`: Cannon's algorithm on WaferLLM's interleaved rings — A and B are placed
  pre-aligned (skewed) and every step shifts A along x and B along y by one logical ring
  position, each shift ≤ 2 hops; P steps on a P×P grid.
- `cannon`: the same on a torus embedded in the mesh (the wrap-around crosses the line).
- `summa`: for each K panel, its owner column broadcasts A along rows and its owner row
  broadcasts B along columns (any P×Q grid).
- `gemm_t`: WaferLLM's dist-GEMM-T, C = A·Bᵀ without transposing on the mesh: B shifts
  along y, each step's partial products are summed along x (a K-tree allreduce, whose
  routes stay fixed while the owning column changes every step) and kept by the owner.

GEMV (y = x·W, x: 1×M replicated along x, W: M×N): a local block product, then an
allreduce along y with `ktree` (WaferLLM's MeshGEMV), `pipeline` or `ring`.

Blocks use f32 for functional checks; the runtime times them at the device's element
width (fp16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType, f32
from xdsl.ir import Attribute, Block, Region, SSAValue

from plmr.dialects import mesh, tile
from plmr.errors import PlmrError

GEMM_ALGORITHMS = ("meshgemm", "cannon", "summa", "gemm_t")
GEMV_ALGORITHMS = ("ktree", "pipeline", "ring")


@dataclass(frozen=True)
class Kernel:
    """A built kernel: its module, the program name and the host input shapes."""

    module: ModuleOp
    name: str
    inputs: tuple[tuple[int, ...], ...]
    description: str


def _tensor(shape: tuple[int, ...], elt: Attribute = f32) -> TensorType[Attribute]:
    return TensorType(elt, shape)


def _dist(shape: tuple[int, ...], layout: mesh.LayoutAttr) -> mesh.DistType:
    return mesh.DistType(_tensor(shape), layout)


def _block(d: mesh.DistType, grid: tuple[int, int]) -> TensorType[Attribute]:
    return _tensor(d.block_shape(grid))


def _index(value: int) -> SSAValue:
    return arith.ConstantOp(IntegerAttr(value, IndexType())).result


def _check_grid(grid: tuple[int, int], **sizes: int) -> None:
    if grid[0] <= 0 or grid[1] <= 0:
        raise PlmrError(f"grid must be positive, got {grid[0]}x{grid[1]}")
    for name, value in sizes.items():
        if value <= 0:
            raise PlmrError(f"{name} must be a positive size, got {value}")


def _program(
    name: str,
    inputs: list[tuple[int, ...]],
    output: tuple[int, ...],
    device: str,
    grid: tuple[int, int],
) -> mesh.ProgramOp:
    return mesh.ProgramOp(
        name, [_tensor(s) for s in inputs], [_tensor(output)], device, grid
    )


# ---------------------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------------------


def cannon_gemm(
    m: int, k: int, n: int, grid: tuple[int, int], device: str, ring: str
) -> Kernel:
    """Cannon's algorithm on a P×P grid; `ring` is `interleaved` (MeshGEMM) or `torus`."""
    _check_grid(grid, m=m, k=k, n=n)
    p, q = grid
    if p != q:
        return _chunked_cannon(m, k, n, grid, device, ring)
    if p == 2 and ring == "interleaved":
        ring = "torus"
    a_d = _dist((m, k), mesh.LayoutAttr(["y", "x"], skew="x", ring=ring))
    b_d = _dist((k, n), mesh.LayoutAttr(["y", "x"], skew="y", ring=ring))
    c_d = _dist((m, n), mesh.LayoutAttr(["y", "x"]))
    name = "meshgemm" if ring == "interleaved" else "cannon"
    program = _program(name, [(m, k), (k, n)], (m, n), device, grid)
    a_blk, b_blk, c_blk = _block(a_d, grid), _block(b_d, grid), _block(c_d, grid)
    body = Block(arg_types=[IndexType(), IndexType(), a_blk, b_blk])
    with ImplicitBuilder(body) as (_, _, a0, b0):
        zero = tile.FillOp(0.0, c_blk).result
        step = Block(arg_types=[IndexType(), c_blk, a_blk, b_blk])
        with ImplicitBuilder(step) as (_, c, a, b):
            # Start the shifts first: they run while the PE multiplies (double buffering).
            a2 = mesh.ShiftOp(a, "x", ring).result
            b2 = mesh.ShiftOp(b, "y", ring).result
            c2 = tile.DotOp(a, b, c).result
            tile.YieldOp(c2, a2, b2)
        loop = tile.ForOp(0, p - 1, 1, "reduction", [zero, a0, b0], Region(step))
        last = tile.DotOp(loop.res[1], loop.res[2], loop.res[0]).result
        mesh.YieldOp(last)
    _wire(program, [a_d, b_d], c_d, body)
    return Kernel(
        ModuleOp([program]),
        name,
        ((m, k), (k, n)),
        f"{name}: C[{m}x{n}] = A[{m}x{k}]·B[{k}x{n}] on {p}x{q} ({ring} ring)",
    )


def _wire(
    program: mesh.ProgramOp, inputs: list[mesh.DistType], output: mesh.DistType, body: Block
) -> None:
    """Scatters the program's inputs, runs `body` on every PE, gathers the result."""
    with ImplicitBuilder(program.body) as hosts:
        placed = [
            mesh.ScatterOp(host, d.layout).result
            for host, d in zip(hosts, inputs, strict=True)
        ]
        result = mesh.SpmdOp(placed, [output], Region(body)).outputs[0]
        mesh.ReturnOp(mesh.GatherOp(result).result)


def _ring_for(ring: str, n: int) -> str:
    return "torus" if ring == "interleaved" and n < 3 else ring


def _rotate(
    buf: SSAValue, rows: int, cols: int, chunk: int, along_cols: bool, axis: str, ring: str
) -> SSAValue:
    """Passes the buffer's last chunk to the ring successor, shifting the rest by one."""
    t = TensorType(f32, (rows, cols))
    count = (cols if along_cols else rows) // chunk
    if count == 1:
        return mesh.ShiftOp(buf, axis, ring).result
    zero = _index(0)
    last_at = _index((count - 1) * chunk)
    if along_cols:
        last = tile.LoadOp(buf, [zero, last_at], (rows, chunk)).result
        head = tile.LoadOp(buf, [zero, zero], (rows, cols - chunk)).result
        at_head = [zero, _index(chunk)]
    else:
        last = tile.LoadOp(buf, [last_at, zero], (chunk, cols)).result
        head = tile.LoadOp(buf, [zero, zero], (rows - chunk, cols)).result
        at_head = [_index(chunk), zero]
    arrived = mesh.ShiftOp(last, axis, ring).result
    fresh = tile.FillOp(0.0, t).result
    moved = tile.StoreOp(head, fresh, at_head).result
    return tile.StoreOp(arrived, moved, [zero, zero]).result


def _chunked_cannon(
    m: int,
    k: int,
    n: int,
    grid: tuple[int, int],
    device: str,
    ring: str,
    transposed_b: bool = False,
) -> Kernel:
    """
    Cannon on a P×Q grid: K is cut into L = lcm(P, Q) chunks that circulate on rings of
    L slots (L/Q per PE along x for A, L/P per PE along y for B), placed pre-aligned, so
    every step multiplies one matching pair of chunks (WaferLLM's lcm tiling). With
    `transposed_b`, B is N×K and placed pre-transposed (N over x, K over y): C = A·Bᵀ
    with no transpose on the mesh.
    """
    p, q = grid
    chunks = math.lcm(p, q)
    if k % chunks:
        raise PlmrError(
            f"on a {p}x{q} grid K must be a multiple of lcm({p}, {q}) = {chunks}, got {k}"
        )
    a_d = _dist((m, k), mesh.LayoutAttr(["y", "x"], skew="x", ring=ring, chunks=chunks))
    b_shape, b_dims = ((n, k), ["x", "y"]) if transposed_b else ((k, n), ["y", "x"])
    b_d = _dist(b_shape, mesh.LayoutAttr(b_dims, skew="y", ring=ring, chunks=chunks))
    c_d = _dist((m, n), mesh.LayoutAttr(["y", "x"]))
    name = "gemm_t" if transposed_b else "meshgemm" if ring == "interleaved" else "cannon"
    program = _program(name, [(m, k), b_shape], (m, n), device, grid)
    a_blk, b_blk, c_blk = _block(a_d, grid), _block(b_d, grid), _block(c_d, grid)
    (mb, ka), (b_rows, b_cols) = a_blk.get_shape(), b_blk.get_shape()
    size = k // chunks
    body = Block(arg_types=[IndexType(), IndexType(), a_blk, b_blk])
    with ImplicitBuilder(body) as (_, _, a0, b0):
        zero_c = tile.FillOp(0.0, c_blk).result
        step = Block(arg_types=[IndexType(), c_blk, a_blk, b_blk])
        with ImplicitBuilder(step) as (_, c, a, b):
            first = _index(0)
            a_now = tile.LoadOp(a, [first, first], (mb, size)).result
            b_chunk = (b_rows, size) if transposed_b else (size, b_cols)
            b_now = tile.LoadOp(b, [first, first], b_chunk).result
            a2 = _rotate(a, mb, ka, size, True, "x", _ring_for(ring, q))
            b2 = _rotate(b, b_rows, b_cols, size, transposed_b, "y", _ring_for(ring, p))
            c2 = tile.DotOp(a_now, b_now, c, transpose_b=transposed_b).result
            tile.YieldOp(c2, a2, b2)
        loop = tile.ForOp(0, chunks, 1, "reduction", [zero_c, a0, b0], Region(step))
        mesh.YieldOp(loop.res[0])
    _wire(program, [a_d, b_d], c_d, body)
    product = f"A[{m}x{k}]·B[{n}x{k}]ᵀ" if transposed_b else f"A[{m}x{k}]·B[{k}x{n}]"
    return Kernel(
        ModuleOp([program]),
        name,
        ((m, k), b_shape),
        f"{name}: C[{m}x{n}] = {product} on {p}x{q} ({ring} rings, {chunks} K-chunks)",
    )


def summa_gemm(m: int, k: int, n: int, grid: tuple[int, int], device: str) -> Kernel:
    """SUMMA: for each K panel, broadcast A along rows and B along columns."""
    _check_grid(grid, m=m, k=k, n=n)
    p, q = grid
    panels = math.lcm(p, q)
    a_d = _dist((m, k), mesh.LayoutAttr(["y", "x"]))
    b_d = _dist((k, n), mesh.LayoutAttr(["y", "x"]))
    c_d = _dist((m, n), mesh.LayoutAttr(["y", "x"]))
    a_blk, b_blk, c_blk = _block(a_d, grid), _block(b_d, grid), _block(c_d, grid)
    ka, kb = a_blk.get_shape()[1], b_blk.get_shape()[0]
    if ka * q != kb * p or ka % (panels // q) or kb % (panels // p):
        raise PlmrError(
            f"summa needs K = {k} divisible into {panels} equal panels on a {p}x{q} grid "
            f"(K a multiple of {panels})"
        )
    width = ka // (panels // q)
    program = _program("summa", [(m, k), (k, n)], (m, n), device, grid)
    body = Block(arg_types=[IndexType(), IndexType(), a_blk, b_blk])
    with ImplicitBuilder(body) as (_, _, a, b):
        zero = tile.FillOp(0.0, c_blk).result
        step = Block(arg_types=[IndexType(), c_blk])
        with ImplicitBuilder(step) as (t, c):
            per_x, per_y = _index(panels // q), _index(panels // p)
            col = arith.DivUIOp(t, per_x).result
            row = arith.DivUIOp(t, per_y).result
            off_a = arith.MuliOp(arith.RemUIOp(t, per_x).result, _index(width)).result
            off_b = arith.MuliOp(arith.RemUIOp(t, per_y).result, _index(width)).result
            zero_i = _index(0)
            a_panel = tile.LoadOp(a, [zero_i, off_a], (a_blk.get_shape()[0], width)).result
            b_panel = tile.LoadOp(b, [off_b, zero_i], (width, b_blk.get_shape()[1])).result
            a_b = mesh.BroadcastOp(a_panel, "x", col).result
            b_b = mesh.BroadcastOp(b_panel, "y", row).result
            tile.YieldOp(tile.DotOp(a_b, b_b, c).result)
        loop = tile.ForOp(0, panels, 1, "reduction", [zero], Region(step))
        mesh.YieldOp(loop.res[0])
    _wire(program, [a_d, b_d], c_d, body)
    return Kernel(
        ModuleOp([program]),
        "summa",
        ((m, k), (k, n)),
        f"summa: C[{m}x{n}] = A[{m}x{k}]·B[{k}x{n}] on {p}x{q} ({panels} panels)",
    )


def _ring_position(step: SSAValue, ring: str, n: int) -> SSAValue:
    """The physical position of logical ring index `step` (arith on a uniform index)."""
    if ring == "torus" or n < 3:
        return step
    # ord(s) = 2s for s < ceil(n/2), else 2(n-1-s)+1.
    half = _index((n + 1) // 2)
    two = _index(2)
    fwd = arith.MuliOp(step, two).result
    back = arith.AddiOp(
        arith.MuliOp(arith.SubiOp(_index(n - 1), step).result, two).result, _index(1)
    ).result
    cond = arith.CmpiOp(step, half, "ult").result
    return arith.SelectOp(cond, fwd, back).result


def gemm_t(
    m: int, k: int, n: int, grid: tuple[int, int], device: str, ring: str = "interleaved"
) -> Kernel:
    """dist-GEMM-T: C = A·Bᵀ (B: N×K) with B shifted along y; no transpose on the mesh."""
    _check_grid(grid, m=m, k=k, n=n)
    p, q = grid
    if p != q:
        # B placed pre-transposed, its K chunks circulating like MeshGEMM's.
        return _chunked_cannon(m, k, n, grid, device, ring, transposed_b=True)
    if p < 3:
        ring = "torus"
    a_d = _dist((m, k), mesh.LayoutAttr(["y", "x"]))
    b_d = _dist((n, k), mesh.LayoutAttr(["y", "x"]))
    c_d = _dist((m, n), mesh.LayoutAttr(["y", "x"], skew="x", ring=ring))
    a_blk, b_blk, c_blk = _block(a_d, grid), _block(b_d, grid), _block(c_d, grid)
    program = _program("gemm_t", [(m, k), (n, k)], (m, n), device, grid)
    body = Block(arg_types=[IndexType(), IndexType(), a_blk, b_blk])
    with ImplicitBuilder(body) as (_, x_coord, a, b0):
        zero = tile.FillOp(0.0, c_blk).result
        step = Block(arg_types=[IndexType(), c_blk, b_blk])
        with ImplicitBuilder(step) as (s, c, b):
            b2 = mesh.ShiftOp(b, "y", ring, -1).result
            part = tile.DotOp(a, b, transpose_b=True).result
            # The row's sum is needed at a different column every step; an allreduce
            # keeps the routes fixed, and the owner of this step's block keeps it.
            total = mesh.AllreduceOp("sum", part, "x").result
            owner = arith.CmpiOp(x_coord, _ring_position(s, ring, q), "eq").result
            c2 = tile.SelectOp(owner, total, c).result
            tile.YieldOp(c2, b2)
        loop = tile.ForOp(0, p, 1, "reduction", [zero, b0], Region(step))
        mesh.YieldOp(loop.res[0])
    _wire(program, [a_d, b_d], c_d, body)
    return Kernel(
        ModuleOp([program]),
        "gemm_t",
        ((m, k), (n, k)),
        f"gemm_t: C[{m}x{n}] = A[{m}x{k}]·B[{n}x{k}]ᵀ on {p}x{q} ({ring} ring)",
    )


def gemm(
    algorithm: str, m: int, k: int, n: int, grid: tuple[int, int], device: str
) -> Kernel:
    """A GEMM kernel by algorithm name (meshgemm, cannon, summa, gemm_t)."""
    if algorithm == "meshgemm":
        return cannon_gemm(m, k, n, grid, device, "interleaved")
    if algorithm == "cannon":
        return cannon_gemm(m, k, n, grid, device, "torus")
    if algorithm == "summa":
        return summa_gemm(m, k, n, grid, device)
    if algorithm == "gemm_t":
        return gemm_t(m, k, n, grid, device)
    raise PlmrError(f"unknown GEMM algorithm '{algorithm}' ({', '.join(GEMM_ALGORITHMS)})")


# ---------------------------------------------------------------------------------------
# GEMV
# ---------------------------------------------------------------------------------------


def gemv(
    algorithm: str,
    m: int,
    n: int,
    grid: tuple[int, int],
    device: str,
    k: int = 2,
    groups: int | None = None,
) -> Kernel:
    """y[1×N] = x[1×M]·W[M×N]: local products, then an allreduce along y."""
    _check_grid(grid, m=m, n=n)
    if k < 1:
        raise PlmrError(f"k (the K-tree's number of phases) must be >= 1, got {k}")
    if k < 2 and groups not in (None, 1):
        raise PlmrError(f"--groups {groups} needs --k >= 2 (with k = 1 there is one group)")
    if algorithm not in GEMV_ALGORITHMS:
        raise PlmrError(
            f"unknown GEMV algorithm '{algorithm}' ({', '.join(GEMV_ALGORITHMS)})"
        )
    if groups is not None and algorithm != "ktree":
        raise PlmrError("--groups applies to the ktree algorithm only")
    if groups is not None and not 1 <= groups <= grid[0]:
        raise PlmrError(
            f"groups must be between 1 and the {grid[0]} PEs along y, got {groups}"
        )
    x_d = _dist((1, m), mesh.LayoutAttr(["-", "y"]))
    w_d = _dist((m, n), mesh.LayoutAttr(["y", "x"]))
    y_d = _dist((1, n), mesh.LayoutAttr(["-", "x"]))
    x_blk, w_blk, y_blk = _block(x_d, grid), _block(w_d, grid), _block(y_d, grid)
    program = _program(f"gemv_{algorithm}", [(1, m), (m, n)], (1, n), device, grid)
    body = Block(arg_types=[IndexType(), IndexType(), x_blk, w_blk])
    with ImplicitBuilder(body) as (_, _, x, w):
        part = tile.DotOp(x, w).result
        total = mesh.AllreduceOp("sum", part, "y", algorithm, k, groups).result
        mesh.YieldOp(total)
    del y_blk
    _wire(program, [x_d, w_d], y_d, body)
    label = f"k={k}, groups={groups}" if algorithm == "ktree" else algorithm
    return Kernel(
        ModuleOp([program]),
        program.sym_name.data,
        ((1, m), (m, n)),
        f"gemv {algorithm}: y[1x{n}] = x[1x{m}]·W[{m}x{n}] on {grid[0]}x{grid[1]} ({label})",
    )


# ---------------------------------------------------------------------------------------
# Reductions (the pieces of a layer between its GEMVs/GEMMs)
# ---------------------------------------------------------------------------------------


def vector_allreduce(
    n: int,
    grid: tuple[int, int],
    device: str,
    axis: str = "y",
    kind: str = "sum",
    algorithm: str = "ktree",
    k: int = 2,
) -> Kernel:
    """
    An allreduce of an n-element block per PE along `axis`: a vector of n times the
    other axis' size is split over the other axis and every PE along `axis` holds a
    copy of its block; all of them end with the combined block (`kind`: sum or max).
    """
    _check_grid(grid, n=n)
    if axis not in ("x", "y"):
        raise PlmrError(f"axis must be x or y, got '{axis}'")
    if algorithm not in GEMV_ALGORITHMS:
        raise PlmrError(
            f"unknown allreduce algorithm '{algorithm}' ({', '.join(GEMV_ALGORITHMS)})"
        )
    other = "x" if axis == "y" else "y"
    across = grid[1] if axis == "y" else grid[0]
    shape = (1, n * across)
    v_d = _dist(shape, mesh.LayoutAttr(["-", other]))
    program = _program(f"allreduce_{kind}_{axis}", [shape], shape, device, grid)
    body = Block(arg_types=[IndexType(), IndexType(), _block(v_d, grid)])
    with ImplicitBuilder(body) as (_, _, v):
        mesh.YieldOp(mesh.AllreduceOp(kind, v, axis, algorithm, k).result)
    _wire(program, [v_d], v_d, body)
    return Kernel(
        ModuleOp([program]),
        program.sym_name.data,
        (shape,),
        f"allreduce {kind} of {n} element(s) per PE along {axis} on "
        f"{grid[0]}x{grid[1]} ({algorithm})",
    )


def sum_of_squares(
    rows: int,
    m: int,
    grid: tuple[int, int],
    device: str,
    algorithm: str = "ktree",
    k: int = 2,
) -> Kernel:
    """
    RMSNorm's reduction: the sum of squares of each row of X[rows×M]. For one row
    (decode) X is split over y and replicated along x, and a scalar is allreduced along
    y; for several rows (prefill) the rows are split over y and M over x, and a row's
    sums are allreduced along x. Every PE squares and sums its block first.
    """
    _check_grid(grid, rows=rows, m=m)
    axis = "y" if rows == 1 else "x"
    x_layout = ["-", "y"] if rows == 1 else ["y", "x"]
    x_d = _dist((rows, m), mesh.LayoutAttr(x_layout))
    s_d = _dist((rows, 1), mesh.LayoutAttr(["-", "-"] if rows == 1 else ["y", "-"]))
    program = _program("sum_of_squares", [(rows, m)], (rows, 1), device, grid)
    body = Block(arg_types=[IndexType(), IndexType(), _block(x_d, grid)])
    with ImplicitBuilder(body) as (_, _, x):
        squares = tile.MapOp([x, x], "mul").result
        part = tile.ReduceOp("sum", squares, 1).result
        mesh.YieldOp(mesh.AllreduceOp("sum", part, axis, algorithm, k).result)
    _wire(program, [x_d], s_d, body)
    return Kernel(
        ModuleOp([program]),
        "sum_of_squares",
        ((rows, m),),
        f"sum of squares of X[{rows}x{m}] by rows on {grid[0]}x{grid[1]} "
        f"(allreduce along {axis}, {algorithm})",
    )
