"""`mesh-check-limits` and its deprecated former name `mesh-verify-plmr`."""

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from plmr.dialects.context import make_context
from plmr.passes import get_all_passes

_TORUS = """
mesh.program @torus(%a: tensor<5x4xf32>) -> tensor<5x4xf32> device "test-small" grid [2, 5] {
  %d = mesh.scatter %a : tensor<5x4xf32> -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.shift %b axis x ring torus : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> -> tensor<5x4xf32>
  mesh.return %r : tensor<5x4xf32>
}
"""


def _run(pass_name: str) -> ModuleOp:
    ctx = make_context()
    module = Parser(ctx, _TORUS).parse_module()
    get_all_passes()[pass_name]()().apply(ctx, module)
    return module


def test_check_records_the_figures() -> None:
    module = _run("mesh-check-limits")
    assert (
        "{max_routes = 3 : i64, max_sram_bytes = 24 : i64, longest_path_hops = 4 : i64}"
        in str(module)
    )


def test_old_name_still_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match="use mesh-check-limits"):
        old = _run("mesh-verify-plmr")  # deprecated-alias
    assert str(old) == str(_run("mesh-check-limits"))
