"""
How a compiled program meets the host: the attributes that name its inputs and outputs,
and those that mark an input or output as named state resident on the wafer.

The front end records each tensor's source name (`plmr.name`) and `graph-kv-state` marks
state (`plmr.state`) on a function's arguments and results; `convert-tile-to-mesh` copies
both onto the mesh.program it makes (`plmr.arg_names` / `plmr.result_names`,
`plmr.state_args` / `plmr.state_results`). The compiler writes them and the simulator
reads them, so they sit below both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute

from plmr.dialects import mesh

Entry = func.FuncOp | mesh.ProgramOp
"""A function (reference semantics) or a mesh program (runs on the modelled wafer)."""

NAME_ATTR = "plmr.name"
"""Argument/result attribute holding the tensor's name in the source model."""


def _named(attrs: Sequence[DictionaryAttr] | None, index: int) -> str | None:
    if attrs is None or index >= len(attrs):
        return None
    name = attrs[index].data.get(NAME_ATTR)
    return name.data if isinstance(name, StringAttr) else None


ARG_NAMES_ATTR = "plmr.arg_names"
RESULT_NAMES_ATTR = "plmr.result_names"
"""A mesh.program's record of its source function's input / output names."""


def arg_names(fn: Entry) -> list[str]:
    """Input names: the recorded `plmr.name`s, else `arg0, arg1, ...`."""
    n = len(fn.function_type.inputs.data)
    if isinstance(fn, mesh.ProgramOp):
        return [
            name or f"arg{i}" for i, name in enumerate(program_names(fn, ARG_NAMES_ATTR, n))
        ]
    attrs = None if fn.arg_attrs is None else list(fn.arg_attrs.data)
    return [_named(attrs, i) or f"arg{i}" for i in range(n)]


def result_names(fn: Entry) -> list[str]:
    """Output names: the recorded `plmr.name`s, else `out0, out1, ...`."""
    n = len(fn.function_type.outputs.data)
    if isinstance(fn, mesh.ProgramOp):
        return [
            name or f"out{i}"
            for i, name in enumerate(program_names(fn, RESULT_NAMES_ATTR, n))
        ]
    attrs = None if fn.res_attrs is None else list(fn.res_attrs.data)
    return [_named(attrs, i) or f"out{i}" for i in range(n)]


STATE_ATTR = "plmr.state"
"""Argument/result attribute: the value is the named state that stays on the wafer across
runs (`graph-kv-state`); a mesh.program records them as `plmr.state_args` /
`plmr.state_results` (the state's name, or "" for a host value)."""
STATE_ARGS_ATTR = "plmr.state_args"
STATE_RESULTS_ATTR = "plmr.state_results"


def program_names(program: mesh.ProgramOp, key: str, n: int) -> list[str | None]:
    """The `n` names a mesh.program records under `key` (None where none is given)."""
    names = program.attributes.get(key)
    if not isinstance(names, ArrayAttr):
        return [None] * n
    values = cast(ArrayAttr[Attribute], names).data
    if len(values) != n:
        return [None] * n
    return [v.data if isinstance(v, StringAttr) and v.data else None for v in values]


def _states(
    fn: func.FuncOp | mesh.ProgramOp,
    attrs: Sequence[DictionaryAttr] | None,
    key: str,
    n: int,
) -> list[str | None]:
    if isinstance(fn, mesh.ProgramOp):
        return program_names(fn, key, n)
    out: list[str | None] = []
    for i in range(n):
        value = (
            attrs[i].data.get(STATE_ATTR) if attrs is not None and i < len(attrs) else None
        )
        out.append(value.data if isinstance(value, StringAttr) else None)
    return out


def state_args(fn: func.FuncOp | mesh.ProgramOp) -> list[str | None]:
    """Per input: the name of the wafer-resident state it is, or None (a host input)."""
    attrs = None
    if isinstance(fn, func.FuncOp) and fn.arg_attrs is not None:
        attrs = list(fn.arg_attrs.data)
    return _states(fn, attrs, STATE_ARGS_ATTR, len(fn.function_type.inputs.data))


def state_results(fn: func.FuncOp | mesh.ProgramOp) -> list[str | None]:
    """Per output: the name of the wafer-resident state it is, or None (to the host)."""
    attrs = None
    if isinstance(fn, func.FuncOp) and fn.res_attrs is not None:
        attrs = list(fn.res_attrs.data)
    return _states(fn, attrs, STATE_RESULTS_ATTR, len(fn.function_type.outputs.data))


WEIGHT_ARGS_ATTR = "plmr.weight_args"
"""mesh.program attribute: the indices of the inputs that are model weights, placed on the
wafer when the model is loaded (as a program's own weight constants are), so a run does
not count them as host traffic (`passes/layer_programs.py`). On the func.func of a layer
body compiled once, the same for `convert-tile-to-mesh{rest-weights}`."""


def weight_args(program: mesh.ProgramOp | func.FuncOp) -> set[int]:
    """The indices of `program`'s inputs that are model weights (`WEIGHT_ARGS_ATTR`)."""
    found = program.attributes.get(WEIGHT_ARGS_ATTR)
    if not isinstance(found, ArrayAttr):
        return set()
    values = cast(ArrayAttr[Attribute], found).data
    return {v.value.data for v in values if isinstance(v, IntegerAttr)}


LAYER_ATTR = "plmr.layer"
"""The index of the layer that a `func.call` of an outlined layer body
(`passes/outline_layers.py`), or the `mesh.run` of the layer program it becomes
(`passes/layer_programs.py`), computes."""

STAGES_ATTR = "plmr.stages"
"""func.func attribute of a layered program (`passes/layer_programs.py`): the layers of each
pipeline stage in order, each stage a region of the wafer the size of the programs' grid
(`plmr.target.stages`)."""

STAGE_BYTES_ATTR = "plmr.stage_bytes"
"""func.func attribute beside `STAGES_ATTR`: `[layer, reserved]`, one layer's weights and
the layer body's peak, in bytes per PE, from which the stages were split."""


def stage_layers(fn: func.FuncOp) -> tuple[int, ...]:
    """The layers of each pipeline stage of `fn` (`STAGES_ATTR`); () if it has none."""
    found = fn.attributes.get(STAGES_ATTR)
    if not isinstance(found, ArrayAttr):
        return ()
    values = cast(ArrayAttr[Attribute], found).data
    return tuple(v.value.data for v in values if isinstance(v, IntegerAttr))


def stage_bytes(fn: func.FuncOp) -> tuple[int, int] | None:
    """One layer's weights and the body's peak per PE (`STAGE_BYTES_ATTR`), if recorded."""
    found = fn.attributes.get(STAGE_BYTES_ATTR)
    if not isinstance(found, ArrayAttr):
        return None
    values = [
        v.value.data
        for v in cast(ArrayAttr[Attribute], found).data
        if isinstance(v, IntegerAttr)
    ]
    return (values[0], values[1]) if len(values) == 2 else None
