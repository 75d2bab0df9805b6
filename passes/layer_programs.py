"""
Compiling a model layer by layer: its repeated layers compiled once.

`compile_layered` is what `plmr compile` does with a graph function whose layers repeat
(`graph-outline-layers` finds them):

1. the function's repeated layers become one body function `@F.layer` and one
   `func.call` per layer, passing that layer's weights;
2. the ops before the first layer become `@F.pre` and those after the last `@F.post`
   (each with the weights it reads);
3. each of the three functions is compiled by the whole pipeline (its own blocking
   search) to a `mesh.program`: the body's program is compiled once, whatever the depth;
4. `@F` becomes a sequence of program runs: `mesh.run @F.pre`, `mesh.run @F.layer`
   once per layer with that layer's weights (references, `arith.constant`s of a
   `dense_resource`), `mesh.run @F.post`;
5. the layers are split into pipeline stages, each a region of the grid's size holding
   as many layers as their weights fit beside the body's peak (`plmr.target.stages`),
   recorded on `@F` (`plmr.stages`, `plmr.stage_bytes`) for the runtime to run them and
   price the hops between them.

The weight arguments of `@F.layer` are placed by the body program's `mesh.scatter`s, so
every layer's weights take the layout the one compiled body chose for them: the program
holds the body once plus per layer the references to place. The programs record them
(`plmr.weight_args`): they are placed when the model is loaded, not at every step.

The values one program hands to the next (the hidden state from `@F.pre` to the first
layer, from each layer to the next, from the last to `@F.post`; tables `@F.pre` computes
for every layer) stay on the wafer: `hand_offs` names each chain of them as state
(`plmr.state_results` of the program that leaves it, `plmr.state_args` of the one that
reads it), so the runtime keeps the producer's blocks where they are and the consumer
reads them in place, or re-laid out on the wafer when its nests read another layout.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from plmr.dialects import graph, mesh
from plmr.dialects.graph_weights import lowered_weight, weight_ref
from plmr.errors import PlmrError
from plmr.passes.outline_layers import LAYER_ATTR, LEAVES, outline_function
from plmr.target.device import get_device
from plmr.target.interface import (
    STAGE_BYTES_ATTR,
    STAGES_ATTR,
    STATE_ARGS_ATTR,
    STATE_RESULTS_ATTR,
    WEIGHT_ARGS_ATTR,
    weight_args,
)
from plmr.target.sram import spmd_sram
from plmr.target.stages import place_stages, split_stages


def _part(fn: func.FuncOp, name: str, ops: list[Operation]) -> func.FuncOp | None:
    """
    Moves `ops` (computing ops of `fn`, in order) into a new function `name` and calls
    it in their place; the leaves they read are cloned in. None if `ops` is empty.
    """
    if not ops:
        return None
    members = set(ops)
    inputs: list[SSAValue] = []
    leaves: list[Operation] = []
    for op in ops:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in members:
                continue
            if isinstance(owner, LEAVES):
                if owner not in leaves:
                    leaves.append(owner)
            elif v not in inputs:
                inputs.append(v)
    outputs = [
        r
        for op in ops
        for r in op.results
        if any(use.operation not in members for use in r.uses)
    ]
    block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = {}
    for arg, v in zip(block.args, inputs, strict=True):
        mapping[v] = arg
        if v.name_hint:
            arg.name_hint = v.name_hint
    for leaf in leaves:
        clone = leaf.clone()
        block.add_op(clone)
        mapping[leaf.results[0]] = clone.results[0]
        clone.results[0].name_hint = leaf.results[0].name_hint
    for op in ops:
        clone = op.clone()
        clone.operands = [mapping.get(v, v) for v in op.operands]
        block.add_op(clone)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
            new.name_hint = old.name_hint
    block.add_op(func.ReturnOp(*[mapping[v] for v in outputs]))
    part = func.FuncOp(
        name, ([v.type for v in inputs], [v.type for v in outputs]), Region(block)
    )
    # The names of the model's inputs, for the programs' records.
    if fn.arg_attrs is not None:
        by_arg = {a: attrs for a, attrs in zip(fn.args, fn.arg_attrs.data, strict=True)}
        part.arg_attrs = ArrayAttr(
            [by_arg.get(v, DictionaryAttr({})) for v in inputs]  # type: ignore[arg-type]
        )
    call = func.CallOp(name, inputs, [v.type for v in outputs])
    Rewriter.insert_op(call, InsertPoint.after(ops[-1]))
    for old, new in zip(outputs, call.results, strict=True):
        if old.name_hint:
            new.name_hint = old.name_hint
        for use in list(old.uses):
            if use.operation not in members:
                use.operation.operands[use.index] = new
    for op in reversed(ops):
        Rewriter.erase_op(op)
    for leaf in leaves:
        if not leaf.results[0].uses:
            Rewriter.erase_op(leaf)
    return part


def split_layers(fn: func.FuncOp, body: func.FuncOp) -> list[func.FuncOp]:
    """
    Splits an outlined `fn` into `@F.pre` and `@F.post` around its layer calls; `fn`
    is left calling them. Returns the new functions.
    """
    ops = list(fn.body.block.ops)
    callee = body.sym_name.data
    calls = [
        i
        for i, op in enumerate(ops)
        if isinstance(op, func.CallOp) and op.callee.string_value() == callee
    ]
    first, last = calls[0], calls[-1]

    def computing(op: Operation) -> bool:
        return not isinstance(op, (*LEAVES, func.ReturnOp, func.CallOp))

    stray = [op for op in ops[first:last] if computing(op)]
    assert not stray, "outlined layers are consecutive"
    name = fn.sym_name.data
    pre = _part(fn, f"{name}.pre", [op for op in ops[:first] if computing(op)])
    post = _part(fn, f"{name}.post", [op for op in ops[last:] if computing(op)])
    return [p for p in (pre, post) if p is not None]


Port = tuple[str, bool, int]
"""A program's input (False) or result (True) by index."""


def hand_offs(fn: func.FuncOp) -> dict[Port, str]:
    """
    The state names of `fn`'s hand-offs: the results of a `mesh.run` read only by later
    `mesh.run`s, and the inputs that read them. Ports joined by a hand-off share a name
    (a layer's output and its input, carried from layer to layer). A chain is kept on
    the host when one of its inputs also reads host values, one of its results is
    returned, or a run would read other than the value its chain last left.
    """
    runs = [op for op in fn.body.block.ops if isinstance(op, mesh.RunOp)]
    parent: dict[Port, Port] = {}

    def find(p: Port) -> Port:
        while parent.setdefault(p, p) != p:
            p = parent[p]
        return p

    host: set[Port] = set()
    for run in runs:
        callee = run.callee.string_value()
        for i, v in enumerate(run.arguments):
            owner = v.owner
            port = (callee, False, i)
            find(port)
            if isinstance(owner, mesh.RunOp) and isinstance(v, OpResult):
                parent[find(port)] = find((owner.callee.string_value(), True, v.index))
            else:
                host.add(port)
        for r, v in enumerate(run.res):
            port = (callee, True, r)
            find(port)
            if any(not isinstance(u.operation, mesh.RunOp) for u in v.uses):
                host.add(port)
    dropped = {find(p) for p in host}
    holds: dict[Port, SSAValue] = {}
    for run in runs:
        callee = run.callee.string_value()
        for i, v in enumerate(run.arguments):
            chain = find((callee, False, i))
            if chain not in dropped and holds.get(chain) is not v:
                dropped.add(chain)
        for r, v in enumerate(run.res):
            holds[find((callee, True, r))] = v
    chains: dict[Port, str] = {}
    names: dict[Port, str] = {}
    name = fn.sym_name.data
    for run in runs:
        callee = run.callee.string_value()
        ports = [(callee, True, r) for r in range(len(run.res))]
        ports += [(callee, False, i) for i in range(len(run.arguments))]
        for port in ports:
            chain = find(port)
            if chain in dropped or all(find(p) != chain or p == port for p in parent):
                continue
            names[port] = chains.setdefault(chain, f"{name}.handoff{len(chains)}")
    return names


def _mark_weights(fn: func.FuncOp, body: func.FuncOp) -> None:
    """
    Lists on `body` (`WEIGHT_ARGS_ATTR`) its arguments that every call of it in `fn`
    passes a model weight of its own (a weight reference, not the same value for every
    layer: a RoPE table or a mask is held once for all), for
    `convert-tile-to-mesh{rest-weights}`. A table passed as a separate reference per
    layer counts as the layer's own: it then rests split and is gathered too.
    """
    calls = [
        op.arguments
        for op in fn.body.block.ops
        if isinstance(op, func.CallOp) and op.callee.string_value() == body.sym_name.data
    ]
    listed = _own_arguments(
        calls,
        len(body.function_type.inputs.data),
        lambda v: isinstance(v.owner, Operation) and weight_ref(v.owner) is not None,
    )
    if listed:
        body.attributes[WEIGHT_ARGS_ATTR] = ArrayAttr(
            [IntegerAttr(i, i64) for i in sorted(listed)]
        )


def _record(fn: func.FuncOp, module: ModuleOp) -> None:
    """Records on each program its hand-offs (state) and its inputs that are weights."""
    names = hand_offs(fn)
    programs = {p.sym_name.data: p for p in module.ops if isinstance(p, mesh.ProgramOp)}
    runs = [op for op in fn.body.block.ops if isinstance(op, mesh.RunOp)]
    weights: dict[str, set[int]] = {}
    for run in runs:
        callee = run.callee.string_value()
        here = {
            i
            for i, v in enumerate(run.arguments)
            if isinstance(v.owner, arith.ConstantOp) and weight_ref(v.owner) is not None
        }
        weights[callee] = weights[callee] & here if callee in weights else here
    for callee, program in programs.items():
        if callee not in weights:
            continue
        ft = program.function_type
        for key, is_result, n in (
            (STATE_ARGS_ATTR, False, len(ft.inputs.data)),
            (STATE_RESULTS_ATTR, True, len(ft.outputs.data)),
        ):
            row = [names.get((callee, is_result, i), "") for i in range(n)]
            if any(row):
                program.attributes[key] = ArrayAttr([StringAttr(x) for x in row])
        if weights[callee]:
            program.attributes[WEIGHT_ARGS_ATTR] = ArrayAttr(
                [IntegerAttr(i, i64) for i in sorted(weights[callee])]
            )


def _sequence(fn: func.FuncOp, module: ModuleOp) -> None:
    """`fn`'s calls become `mesh.run`s, its leaves host constants (weights by reference)."""
    for op in list(fn.body.block.ops):
        if isinstance(op, func.CallOp):
            run = mesh.RunOp(
                op.callee.string_value(), list(op.arguments), list(op.res.types)
            )
            if LAYER_ATTR in op.attributes:
                run.attributes[LAYER_ATTR] = op.attributes[LAYER_ATTR]
            Rewriter.replace_op(op, run)
        elif isinstance(op, graph.WeightOp):
            ref = weight_ref(op)
            assert ref is not None
            Rewriter.replace_op(op, lowered_weight(ref))
        elif isinstance(op, graph.ConstantOp):
            Rewriter.replace_op(op, arith.ConstantOp(op.value))
    _record(fn, module)


def layer_bytes(program: mesh.ProgramOp, weights_at: set[int]) -> tuple[int, int]:
    """
    One layer's weights on one PE of `program` (the layer body), each of its inputs
    `weights_at` as the blocks its `mesh.scatter`s place, and the body's peak SRAM per PE
    beside them (the largest of its `mesh.spmd`s' live sets, `plmr.target.sram`, less the
    weight blocks an spmd reads in place: they are counted once, in the weights), in the
    device's element width.
    """
    dev = get_device(program.device.spec.data)
    grid = program.grid_shape
    args = program.body.block.args
    weights = 0
    placed: set[SSAValue] = set()
    for i in sorted(weights_at):
        for use in args[i].uses:
            scatter = use.operation
            if isinstance(scatter, mesh.ScatterOp):
                placed.add(scatter.result)
                weights += math.prod(scatter.result.type.block_shape(grid)) * dev.elem_bytes
    peak = 0
    for op in program.walk():
        if not isinstance(op, mesh.SpmdOp):
            continue
        resident = [
            arg
            for arg, v in zip(op.body.block.args[2:], op.inputs, strict=True)
            if v in placed
        ]
        peak = max(peak, spmd_sram(op, dev, resident).peak_bytes)
    return weights, peak


def per_layer_constants(runs: list[mesh.RunOp], arity: int) -> set[int]:
    """
    The inputs of the layer body that hold a layer's own weights: every run passes a host
    constant there (weights by reference, or inline in a small model), and not one value
    that all runs share (a table such as RoPE's, held once whatever the depth). The
    hand-offs between layers are not constants.
    """
    return _own_arguments(
        [run.arguments for run in runs],
        arity,
        lambda v: isinstance(v.owner, arith.ConstantOp),
    )


def _own_arguments(
    calls: Sequence[Sequence[SSAValue]], arity: int, weight: Callable[[SSAValue], bool]
) -> set[int]:
    """
    The argument positions where every call passes a `weight` and, with several calls,
    not the same value to all of them (a table every layer shares is held once).
    """
    own = set(range(arity)) if calls else set[int]()
    for arguments in calls:
        own &= {i for i, v in enumerate(arguments) if weight(v)}
    if len(calls) < 2:
        return own
    return {i for i in own if any(c[i] is not calls[0][i] for c in calls)}


def _stages(fn: func.FuncOp, module: ModuleOp, body: str, depth: int) -> None:
    """
    Records on `fn` its pipeline stages (`STAGES_ATTR`): the fewest regions of the
    body's grid whose layers' weights fit a PE's SRAM beside the body's working set (a
    stage of k layers keeps k layers' weights and runs one, reading its weights in
    place: `layer_bytes`), and checks they fit the device's wafers.
    """
    program = next(
        (
            p
            for p in module.ops
            if isinstance(p, mesh.ProgramOp) and p.sym_name.data == body
        ),
        None,
    )
    if program is None:
        raise PlmrError(
            f"plmr compile: the layer body @{body} has no mesh.program in the module "
            "(a compiler error: the layered compile lost the body it compiled)"
        )
    dev = get_device(program.device.spec.data)
    runs = [
        op
        for op in fn.body.block.ops
        if isinstance(op, mesh.RunOp) and op.callee.string_value() == body
    ]
    weights_at = per_layer_constants(runs, len(program.function_type.inputs.data))
    weights, peak = layer_bytes(program, weights_at | weight_args(program))
    what = f"plmr compile: the layer body @{body} ({depth} layers)"
    groups = split_stages(depth, weights, peak, dev.sram_bytes, what)
    place_stages(
        groups,
        program.grid_shape,
        dev,
        [g * weights + peak for g in groups],
        what=f"plmr compile: @{fn.sym_name.data} ({depth} layers)",
    )
    fn.attributes[STAGES_ATTR] = ArrayAttr([IntegerAttr(g, i64) for g in groups])
    fn.attributes[STAGE_BYTES_ATTR] = ArrayAttr(
        [IntegerAttr(weights, i64), IntegerAttr(peak, i64)]
    )


CompilePart = Callable[[ModuleOp, bool], ModuleOp]
"""Compiles a module of one function by the whole pipeline (True: with `--fit-tiles`)."""


def _compile_part(
    part: func.FuncOp, compile_part: CompilePart, fit_tiles: bool
) -> ModuleOp:
    """
    `part` compiled in a module of its own. A part cut out of a model may hold nests
    that no fixed blocking divides (a split-K chunk of a 72-row cache: 18 rows), which
    the whole model, fused otherwise, did not: such a part is blocked as `--fit-tiles`
    blocks, each block shrunk to a divisor of its dimension.
    """
    sub = ModuleOp([part])
    if fit_tiles:
        return compile_part(sub, True)
    kept = sub.clone()
    try:
        return compile_part(sub, False)
    except PlmrError as e:
        if "does not divide" not in str(e):
            raise
    return compile_part(kept, True)


NEST_REFUSAL = re.compile(r"the nest computing %\S+ does not fit a")
"""A nest no placement fits: the whole function holds the same nest, once per layer."""


def _in_part(
    error: PlmrError, part: func.FuncOp, body: func.FuncOp, layers: int
) -> PlmrError:
    """`error` of compiling `part`, saying which part of the layered function refused."""
    name = part.sym_name.data
    if part is body:
        where = (
            f"the layer body @{name}, compiled once for its {layers} layers (layers 0-"
            f"{layers - 1} run it with their own weights)"
        )
    elif name.endswith(".pre"):
        where = f"@{name}, the ops before the first layer"
    else:
        where = f"@{name}, the ops after the last layer"
    return PlmrError(f"plmr compile: in {where}: {error}")


def compile_layered(
    module: ModuleOp,
    compile_part: CompilePart,
    *,
    prepare: Callable[[ModuleOp], None] | None = None,
    fit_tiles: bool = False,
    min_ops: int = 8,
    layers: int = 0,
) -> bool:
    """
    Compiles `module` with its repeated layers compiled once (see the module docstring),
    each part by `compile_part`, after `prepare` rewrote a copy of the whole program
    (the weight rewrites); False (and `module` untouched) when it has no one graph
    function whose layers repeat, or when a part is refused for what cutting it out
    makes (then the caller compiles the function whole; with `layers` set, that error
    is raised).

    A nest that no placement fits (`NEST_REFUSAL`) is refused at once, naming the part
    and the nest: the whole function holds the same nest, once per layer, and would be
    refused by it only after compiling every layer.
    """
    trial = module.clone()
    fns = [op for op in trial.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if len(fns) != 1 or not any(o.name.startswith("graph.") for o in fns[0].walk()):
        if layers:
            raise PlmrError(
                f"plmr compile: layers={layers} asks for the repeated layers of one graph "
                f"function, but the program has {len(fns)} function(s)"
                + (" without graph ops" if len(fns) == 1 else "")
            )
        return False
    if prepare is not None:
        prepare(trial)
    fns = [op for op in trial.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    fn = fns[0]
    body = outline_function(fn, trial, min_ops, layers)
    if body is None:
        return False
    parts = split_layers(fn, body)
    _mark_weights(fn, body)
    body.detach()
    body.sym_visibility = None
    where = InsertPoint.after(fn)
    depth = sum(
        isinstance(op, func.CallOp) and op.callee.string_value() == body.sym_name.data
        for op in fn.body.block.ops
    )
    for part in (body, *parts):
        # Each part has its own blocking search: one blocking need not suit them all.
        try:
            sub = _compile_part(part, compile_part, fit_tiles)
        except PlmrError as e:
            if layers or NEST_REFUSAL.search(str(e)):
                raise _in_part(e, part, body, depth) from None
            # Refused for what the cut alone makes: the function is compiled whole.
            return False
        for op in list(sub.ops):
            op.detach()
            Rewriter.insert_op(op, where)
            where = InsertPoint.after(op)
    _sequence(fn, trial)
    _stages(fn, trial, body.sym_name.data, depth)
    for op in list(module.ops):
        Rewriter.erase_op(op)
    for op in list(trial.ops):
        op.detach()
        module.body.block.add_op(op)
    return True


__all__ = ["CompilePart", "compile_layered", "hand_offs", "layer_bytes", "split_layers"]
