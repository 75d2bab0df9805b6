"""
Differential tests of the ops of ONNX models (where, cmp, logic, casts, abs, log, cos,
sin, sinh, cosh, RoPE's tables of run-time positions, concatenations of computed values, floor, ceil, reciprocal, pow, maximum, minimum, slice, expand, pad, gather_elements) through
every level: the graph reference semantics, the loop runtime after
`convert-graph-to-loop`, and the mesh runtime (functional mode) after `plmr compile` for
a 2x2 grid, on random inputs. The forms the tile level cannot block are refused with one
clear error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from plmr.dialects.context import make_context, parse_module
from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass
from plmr.passes.pipeline import CompileOptions, compile_module
from plmr.runtime.reference import evaluate_function
from plmr.runtime.running import random_inputs, run_entry, select_entry

F = "tensor<4x6xf32>"
B = "tensor<4x6xi1>"
I = "tensor<4x6xi64>"

PROGRAMS: dict[str, tuple[str, str]] = {
    # name: (arguments, body ending in %y)
    "where": (
        f"%c: tensor<4x1xi1>, %a: {F}, %b: tensor<6xf32>",
        f"%y = graph.where %c, %a, %b : (tensor<4x1xi1>, {F}, tensor<6xf32>) -> {F}",
    ),
    "cmp_where": (
        f"%a: {F}, %b: tensor<6xf32>",
        f"%m = graph.cmp lt %a, %b : ({F}, tensor<6xf32>) -> {B}\n"
        f"  %y = graph.where %m, %a, %b : ({B}, {F}, tensor<6xf32>) -> {F}",
    ),
    "constants": (
        f"%a: {F}, %i: tensor<4x6xi32>",
        "%m = graph.constant dense<[true, false, false, true, true, false]> : tensor<6xi1>\n"
        "  %k = graph.constant dense<[[3], [-2], [0], [7]]> : tensor<4x1xi32>\n"
        "  %z = graph.constant dense<0.5> : tensor<f32>\n"
        "  %j = graph.maximum %i, %k : (tensor<4x6xi32>, tensor<4x1xi32>) -> tensor<4x6xi32>\n"
        "  %f = graph.cast %j : tensor<4x6xi32> -> tensor<4x6xf32>\n"
        f"  %w = graph.where %m, %a, %z : (tensor<6xi1>, {F}, tensor<f32>) -> {F}\n"
        f"  %y = graph.add %w, %f : ({F}, {F}) -> {F}",
    ),
    "cmp_ge_int": (
        f"%a: {I}, %b: tensor<4x1xi64>",
        f"%y = graph.cmp ge %a, %b : ({I}, tensor<4x1xi64>) -> {B}",
    ),
    "cmp_eq_bool": (
        f"%a: {B}, %b: {B}",
        f"%y = graph.cmp eq %a, %b : ({B}, {B}) -> {B}",
    ),
    "logic": (
        f"%a: {B}, %b: tensor<6xi1>, %c: tensor<4x1xi1>",
        f"%n = graph.not %a : {B}\n"
        f"  %x = graph.and %n, %b : ({B}, tensor<6xi1>) -> {B}\n"
        f"  %o = graph.or %x, %c : ({B}, tensor<4x1xi1>) -> {B}\n"
        f"  %y = graph.xor %o, %a : ({B}, {B}) -> {B}",
    ),
    "cast_f32_i64": (f"%a: {F}", f"%y = graph.cast %a : {F} -> {I}"),
    "cast_i64_f32": (f"%a: {I}", f"%y = graph.cast %a : {I} -> {F}"),
    "cast_f32_i1": (f"%a: {F}", f"%y = graph.cast %a : {F} -> {B}"),
    "cast_i1_f32": (f"%a: {B}", f"%y = graph.cast %a : {B} -> {F}"),
    "cast_i1_i64": (f"%a: {B}", f"%y = graph.cast %a : {B} -> {I}"),
    "cast_i64_i32": (f"%a: {I}", f"%y = graph.cast %a : {I} -> tensor<4x6xi32>"),
    "cast_mask": (
        f"%a: {F}",
        f"%m = graph.cast %a : {F} -> {B}\n"
        f"  %f = graph.cast %m : {B} -> {F}\n"
        f"  %y = graph.mul %a, %f : ({F}, {F}) -> {F}",
    ),
    "abs": (f"%a: {F}", f"%y = graph.abs %a : {F}"),
    "abs_int": (f"%a: {I}", f"%y = graph.abs %a : {I}"),
    "log": (f"%a: {F}", f"%p = graph.abs %a : {F}\n  %y = graph.log %p : {F}"),
    "cos": (f"%a: {F}", f"%y = graph.cos %a : {F}"),
    "sinh": (f"%a: {F}", f"%y = graph.sinh %a : {F}"),
    "cosh": (f"%a: {F}", f"%y = graph.cosh %a : {F}"),
    "sin": (f"%a: {F}", f"%y = graph.sin %a : {F}"),
    "rope_tables": (
        "%p: tensor<8x1xi64>",
        "%f = graph.cast %p : tensor<8x1xi64> -> tensor<8x1xf32>\n"
        "  %inv = graph.constant dense<[[1.0, 0.1, 0.01, 0.001]]> : tensor<1x4xf32>\n"
        "  %t = graph.mul %f, %inv : (tensor<8x1xf32>, tensor<1x4xf32>) -> tensor<8x4xf32>\n"
        "  %c = graph.cos %t : tensor<8x4xf32>\n"
        "  %s = graph.sin %t : tensor<8x4xf32>\n"
        "  %y = graph.concat %c, %s axis = 1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>",
    ),
    "concat_of_computed": (
        f"%a: {F}, %b: tensor<4x3xf32>",
        f"%e = graph.exp %a : {F}\n"
        "  %n = graph.neg %b : tensor<4x3xf32>\n"
        f"  %y = graph.concat %e, %n axis = 1 : ({F}, tensor<4x3xf32>) -> tensor<4x9xf32>",
    ),
    "floor": (f"%a: {F}", f"%y = graph.floor %a : {F}"),
    "ceil": (f"%a: {F}", f"%y = graph.ceil %a : {F}"),
    "reciprocal": (f"%a: {F}", f"%y = graph.reciprocal %a : {F}"),
    "pow": (f"%a: {F}", f"%p = graph.abs %a : {F}\n  %y = graph.pow %p by 2.5 : {F}"),
    "pow_square": (f"%a: {F}", f"%y = graph.pow %a by 2.0 : {F}"),
    "maximum": (
        f"%a: {F}, %b: tensor<f32>",
        f"%y = graph.maximum %a, %b : ({F}, tensor<f32>) -> {F}",
    ),
    "minimum_int": (
        f"%a: {I}, %b: tensor<6xi64>",
        f"%y = graph.minimum %a, %b : ({I}, tensor<6xi64>) -> {I}",
    ),
    "slice": (
        f"%a: {F}",
        f"%y = graph.slice %a starts = [2, 1] ends = [4, 5] steps = [1, 1] : {F} -> tensor<2x4xf32>",
    ),
    "slice_strided": (
        f"%a: {F}",
        f"%y = graph.slice %a starts = [3, 0] ends = [-1, 6] steps = [-1, 2] : {F} -> tensor<4x3xf32>",
    ),
    "expand": (
        "%a: tensor<4x1xf32>",
        "%y = graph.expand %a : tensor<4x1xf32> -> tensor<2x4x6xf32>",
    ),
    "expand_bool": (
        "%a: tensor<6xi1>",
        f"%y = graph.expand %a : tensor<6xi1> -> {B}",
    ),
    "pad_reflect": (
        f"%a: {F}",
        f"%y = graph.pad %a pads = [2, 1, 1, 3] mode = reflect value = 0.0 : {F} -> tensor<7x10xf32>",
    ),
    "pad_edge": (
        f"%a: {I}",
        f"%y = graph.pad %a pads = [1, 0, 2, 2] mode = edge value = 0.0 : {I} -> tensor<7x8xi64>",
    ),
    "pad_constant": (
        f"%a: {F}",
        f"%y = graph.pad %a pads = [0, 2, 2, 0] mode = constant value = 1.5 : {F} -> tensor<6x8xf32>",
    ),
    "pad_of_computed": (
        f"%a: {F}",
        f"%e = graph.exp %a : {F}\n"
        f"  %y = graph.pad %e pads = [1, 0, 1, 2] mode = constant value = 0.0 : {F} -> tensor<6x8xf32>",
    ),
    "chain": (
        f"%a: {F}, %b: tensor<6xf32>, %m: {B}",
        f"%lt = graph.cmp lt %a, %b : ({F}, tensor<6xf32>) -> {B}\n"
        f"  %x = graph.xor %lt, %m : ({B}, {B}) -> {B}\n"
        f"  %w = graph.where %x, %a, %b : ({B}, {F}, tensor<6xf32>) -> {F}\n"
        f"  %f = graph.floor %w : {F}\n"
        f"  %s = graph.slice %f starts = [1, 0] ends = [3, 6] steps = [1, 1] : {F} -> tensor<2x6xf32>\n"
        f"  %r = graph.pad %s pads = [1, 2, 1, 2] mode = reflect value = 0.0 : tensor<2x6xf32> -> tensor<4x10xf32>\n"
        f"  %y = graph.pad %r pads = [1, 0, 0, 1] mode = constant value = -1.0 : tensor<4x10xf32> -> tensor<5x11xf32>",
    ),
    "masked_softmax": (
        "%a: tensor<8x8xf32>, %m: tensor<8x8xi1>",
        "%ninf = graph.constant dense<-1.0e9> : tensor<f32>\n"
        "  %w = graph.where %m, %a, %ninf : (tensor<8x8xi1>, tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>\n"
        "  %y = graph.softmax %w : tensor<8x8xf32>",
    ),
    "large_slice_expand_pad": (
        "%a: tensor<16x32xf32>",
        "%s = graph.slice %a starts = [4, 8] ends = [12, 24] steps = [1, 1] : tensor<16x32xf32> -> tensor<8x16xf32>\n"
        "  %e = graph.expand %s : tensor<8x16xf32> -> tensor<2x8x16xf32>\n"
        "  %y = graph.pad %e pads = [0, 4, 0, 0, 4, 16] mode = constant value = 0.0 : tensor<2x8x16xf32> -> tensor<2x16x32xf32>",
    ),
    "gather_elements": (
        f"%a: {F}, %i: tensor<2x6xi64>",
        f"%y = graph.gather_elements %a, %i axis = 0 : ({F}, tensor<2x6xi64>) -> tensor<2x6xf32>",
    ),
    "gather_elements_int": (
        f"%a: {I}, %i: tensor<2x6xi64>",
        f"%y = graph.gather_elements %a, %i axis = 0 : ({I}, tensor<2x6xi64>) -> tensor<2x6xi64>",
    ),
    "gather_bool_runtime_ids": (
        f"%a: {F}, %b: {F}, %i: tensor<5xi32>",
        f"%m = graph.cmp lt %a, %b : ({F}, {F}) -> tensor<4x6xi1>\n"
        "  %y = graph.gather %m, %i : (tensor<4x6xi1>, tensor<5xi32>) -> tensor<5x6xi1>",
    ),
    "gather_constant_ids_computed": (
        f"%a: {F}",
        f"%e = graph.exp %a : {F}\n"
        "  %i = graph.constant dense<[[2, 0, 3], [-1, 1, 1]]> : tensor<2x3xi64>\n"
        f"  %y = graph.gather %e, %i axis = 0 : ({F}, tensor<2x3xi64>) -> tensor<2x3x6xf32>",
    ),
    "conv_strided_padded": (
        "%x: tensor<1x2x7x8xf32>, %w: tensor<3x2x3x2xf32>",
        "%y = graph.conv2d %x, %w strides = [2, 3] pads = [1, 0, 1, 1] dilations = [1, 2] : (tensor<1x2x7x8xf32>, tensor<3x2x3x2xf32>) -> tensor<1x3x4x3xf32>",
    ),
}


def program(name: str) -> str:
    args, body = PROGRAMS[name]
    last = body.splitlines()[-1]
    result = last.rsplit("-> ", 1)[-1] if "->" in last else last.rsplit(": ", 1)[-1]
    return f"func.func @main({args}) -> {result} {{\n  {body}\n  func.return %y : {result}\n}}\n"


def inputs(name: str) -> tuple[Any, list[np.ndarray[Any, Any]]]:
    module = parse_module(program(name))
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    args = random_inputs(fn, 7)
    # Some fractions and negative integers (truncation, abs, floor, ceil).
    args = [a * 3 if a.dtype.kind == "f" else a for a in args]
    args = [a - 4 if a.dtype.kind == "i" and "gather" not in name else a for a in args]
    return module, args


def assert_same(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_loop_level_matches_the_graph(name: str):
    module, args = inputs(name)
    (want,) = evaluate_function(module, "main", args)
    ConvertGraphToLoopPass().apply(Context(), module)
    module.verify()
    (got,) = evaluate_function(module, "main", args)
    assert_same(got, want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_mesh_program_matches_the_graph(name: str):
    module, args = inputs(name)
    (want,) = evaluate_function(module, "main", args)
    compile_module(make_context(), module, CompileOptions(grid=(2, 2), substitute=False))
    module.verify()
    entry = select_entry(module, None)
    assert entry.name == "mesh.program"
    (got,), report = run_entry(module, entry, args)
    assert report is not None
    assert report.cycles > 0
    assert_same(got, want)
