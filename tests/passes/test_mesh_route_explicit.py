"""`mesh-route{explicit=true}`: collectives become sends and receives that compute the same."""

from collections.abc import Callable

import numpy as np
import pytest

from plmr.dialects import mesh
from plmr.dialects.context import make_context, parse_module
from plmr.dialects.printing import module_text
from plmr.lowering.kernels import Kernel, gemm, gemv
from plmr.passes.mesh_route import MeshRoutePass
from plmr.runtime.mesh_machine import run_mesh

KERNELS: dict[str, Callable[[], Kernel]] = {
    "meshgemm-4x4": lambda: gemm("meshgemm", 40, 40, 40, (4, 4), "test-small"),
    "meshgemm-5x5": lambda: gemm("meshgemm", 30, 25, 20, (5, 5), "test-small"),
    "cannon-3x3": lambda: gemm("cannon", 30, 30, 30, (3, 3), "test-small"),
    "gemv-ktree": lambda: gemv("ktree", 40, 24, (8, 4), "test-small", groups=2),
    "gemv-ktree-k3": lambda: gemv("ktree", 64, 24, (8, 3), "test-small", k=3),
    "gemv-pipeline": lambda: gemv("pipeline", 40, 24, (5, 3), "test-small"),
}

REDUCE = """
mesh.program @reduce(%a: tensor<8x8xf32>) -> tensor<8x8xf32> device "test-small" grid [4, 4] {
  %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<2x2xf32>):
    %root = arith.constant 2 : index
    %s = mesh.reduce max %b axis y root %root algorithm pipeline : tensor<2x2xf32>
    %t = mesh.broadcast %s axis y root %root : tensor<2x2xf32>
    %u = mesh.shift %t axis x ring linear distance -1 : tensor<2x2xf32>
    mesh.yield %u : tensor<2x2xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> -> tensor<8x8xf32>
  mesh.return %r : tensor<8x8xf32>
}
"""


def _lower(module_text_in: str) -> str:
    module = parse_module(module_text_in)
    MeshRoutePass(explicit=True).apply(make_context(), module)
    module.verify()
    return module_text(module)


def _collectives(text: str) -> int:
    return sum(
        text.count(f"mesh.{c} ") for c in ("shift", "broadcast", "allreduce", "reduce")
    )


@pytest.mark.parametrize("name", KERNELS)
def test_explicit_form_computes_the_same(name: str):
    kernel = KERNELS[name]()
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in kernel.inputs]
    (want,), _ = run_mesh(kernel.module, inputs)
    lowered = _lower(module_text(kernel.module))
    assert _collectives(lowered) == 0
    assert "mesh.send" in lowered
    assert "mesh.recv" in lowered
    assert "generated" not in lowered
    (got,), report = run_mesh(parse_module(lowered), inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert report.max_routes >= 1


def test_rooted_collectives_with_constant_roots_are_lowered():
    x = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    (want,), _ = run_mesh(parse_module(REDUCE), [x])
    lowered = _lower(REDUCE)
    assert _collectives(lowered) == 0
    (got,), _ = run_mesh(parse_module(lowered), [x])
    np.testing.assert_array_equal(got, want)
    blocks = x.reshape(4, 2, 4, 2).max(axis=0)  # max over the 4 rows of blocks
    expected = np.zeros((4, 2, 4, 2), np.float32)
    expected[:, :, :3, :] = blocks[None, :, 1:, :]  # shifted one PE west, zeros enter
    np.testing.assert_array_equal(got, expected.reshape(8, 8))


def test_ring_allreduce_and_changing_roots_stay_collectives():
    ring = gemv("ring", 40, 24, (5, 3), "test-small")
    assert "mesh.allreduce" in _lower(module_text(ring.module))
    summa = gemm("summa", 24, 24, 24, (3, 3), "test-small")
    lowered = _lower(module_text(summa.module))
    assert lowered.count("mesh.broadcast") == 2
    assert isinstance(next(iter(parse_module(lowered).ops)), mesh.ProgramOp)
