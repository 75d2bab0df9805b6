"""
`graph-kv-state`: a decoder export's KV cache becomes state that lives on the wafer.

A decode step exported by torch.onnx or Optimum takes every layer's cache as an input and
hands it back, one row longer, as an output: `past_key_values.N.key [1, Hkv, S-1, hd]` in,
`present.N.key = Concat(past, new, axis=2) [1, Hkv, S, hd]` out, with `position_ids
[1, 1]` and `attention_mask [1, S]` (1 = attend) in. Compiled as it is, the whole cache
crosses the host link twice per token. This pass turns each such input/output pair into
one buffer of `S` rows (the capacity) that stays where it is between steps:

- the input becomes the buffer itself, `[1, Hkv, S, hd]`, marked `plmr.state = "OUT"`
  (OUT is the output's name), and the output, marked the same, is the buffer after the
  step; the runtime keeps it on the wafer and feeds it to the next step;
- the Concat becomes a selection: row `p = position_ids` of the buffer receives the new
  row, `where(iota == p, new, buffer)` (`kv_slot = iota == p`, i1); the other rows are
  the buffer's as they are, with no arithmetic on them (a multiply by `1 − slot` would
  turn a non-finite entry of an unused row into NaN and costs a product per cached
  element);
- the attention mask input goes: the step computes it from the position, `valid[j] = 1`
  for `j ≤ p` (`relu(1 − (iota − p)) − relu(−(iota − p))`), in the mask's element type,
  so rows beyond the current length are masked whatever they hold.

The export's static shapes hold one length (S − 1 cached rows); the rewritten step works
at every position `p < S`: the position is the step's only notion of length (row `p`
receives the new entry, rows `0..p` are attended), which is what a batch of one without
padding feeds. The capacity is the export's S (`capacity` may only restate it): export
the step with the longest cache it should hold.

A prefill export returns `present.N.key [1, Hkv, L, hd]` with no past input. With
`capacity = C` (> L) each such output becomes the state's first value, `[1, Hkv, C, hd]`:
its rows `0..L-1` are the prompt's (a batched product by the constant `C × L` identity
rows, exact), the rest zero; the decode step then continues at position L.

Pairs are found by name (`past_key_values.N.key` ↔ `present.N.key`, `past_key_N` ↔
`present_key_N`, and any input `past…` whose name with `past_key_values` / `past` replaced
by `present` is an output), or given as `state="IN=OUT,IN=OUT"` (then only those; in a
prefill `IN` is absent and `OUT` is its output). A pair that is not one cache, a name that
is not an input or output, or a missing position input is one error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float32Type,
    ModuleOp,
    StringAttr,
    f32,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from plmr.dialects import graph
from plmr.dialects.graph import element_type, static_shape
from plmr.dialects.narrow import terminator
from plmr.errors import PlmrError
from plmr.target.interface import STATE_ATTR, arg_names, result_names, state_args
from plmr.values import constant_attr

PASS = "graph-kv-state"

POSITION = "position_ids"
MASK = "attention_mask"


@dataclass(frozen=True)
class StatePair:
    """One cache: the input that brings it (None in a prefill) and the output it becomes."""

    input: str | None
    output: str


def parse_state_pairs(text: str) -> list[StatePair]:
    """`IN=OUT,IN=OUT` (spaces allowed) -> pairs; one error for a malformed entry."""
    pairs: list[StatePair] = []
    for entry in [e.strip() for e in text.split(",") if e.strip()]:
        parts = [p.strip() for p in entry.split("=")]
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise PlmrError(
                f"{PASS}: state pair '{entry}' must be IN=OUT (an input name, '=', an "
                "output name), e.g. past_key_values.0.key=present.0.key"
            )
        pairs.append(StatePair(parts[0], parts[1]))
    return pairs


def _present_names(name: str) -> list[str]:
    """The output names that are the cache brought in by input `name`."""
    if not name.startswith("past"):
        return []
    out = [name.replace("past_key_values", "present", 1), re.sub("^past", "present", name)]
    return list(dict.fromkeys(out))


def find_pairs(fn: func.FuncOp) -> list[StatePair]:
    """The caches of `fn` found by name (decode pairs, else a prefill's `present` outputs)."""
    ins, outs = arg_names(fn), result_names(fn)
    pairs: list[StatePair] = []
    for name in ins:
        match = next((o for o in _present_names(name) if o in outs), None)
        if match is not None:
            pairs.append(StatePair(name, match))
    if pairs:
        return pairs
    return [StatePair(None, o) for o in outs if o.startswith("present")]


def _set_attr(
    attrs: ArrayAttr[DictionaryAttr] | None, n: int, index: int, key: str, value: str
) -> ArrayAttr[DictionaryAttr]:
    dicts = list(attrs.data) if attrs is not None else [DictionaryAttr({})] * n
    entries = dict(dicts[index].data)
    entries[key] = StringAttr(value)
    dicts[index] = DictionaryAttr(entries)
    return ArrayAttr(dicts)


@dataclass
class _Rewriter:
    fn: func.FuncOp
    capacity: int
    position: str
    mask: str
    pos_cache: dict[str, SSAValue] = field(default_factory=dict[str, SSAValue])
    before: Operation | None = None

    def where(self, what: str) -> str:
        return f"{PASS}: @{self.fn.sym_name.data}: {what}"

    def insert(self, op: Operation) -> Operation:
        block = self.fn.body.block
        if self.before is not None:
            block.insert_op_after(op, self.before)
        else:
            first = block.first_op
            assert first is not None  # a function ends with its return
            block.insert_op_before(op, first)
        self.before = op
        return op

    def const(self, array: np.ndarray[tuple[int, ...], np.dtype[np.float32]]) -> SSAValue:
        return self.insert(graph.ConstantOp(constant_attr(array, f32))).results[0]

    def arg(self, name: str) -> BlockArgument | None:
        names = arg_names(self.fn)
        return self.fn.body.block.args[names.index(name)] if name in names else None

    def result_index(self, name: str) -> int:
        names = result_names(self.fn)
        if name not in names:
            raise PlmrError(
                self.where(
                    f"'{name}' is not an output (outputs: {', '.join(names)}); name the "
                    "cache's output in the state pair"
                )
            )
        return names.index(name)

    # -- the position and what follows from it -----------------------------------------

    def offset(self, length: int) -> SSAValue:
        """`iota − p`, `[1, length]`, f32, from the position input."""
        if "d" in self.pos_cache:
            return self.pos_cache["d"]
        pos = self.arg(self.position)
        if pos is None:
            raise PlmrError(
                self.where(
                    f"the decode step has no input '{self.position}': the cache's row is "
                    "the token's position; name the position input with "
                    "position=NAME (or --position)"
                )
            )
        shape = static_shape(pos, "position")
        if int(np.prod(shape)) != 1:
            raise PlmrError(
                self.where(
                    f"the position input '{self.position}' has shape {list(shape)}; a "
                    "decode step of one token (batch 1) takes one position, [1, 1]"
                )
            )
        p: SSAValue = pos
        if not isinstance(element_type(pos), Float32Type):
            p = self.insert(graph.CastOp(pos, f32)).results[0]
        if shape != (1, 1):
            p = self.insert(graph.ReshapeOp(p, (1, 1))).results[0]
        iota = self.const(np.arange(length, dtype=np.float32).reshape(1, length))
        d = self.insert(graph.SubOp(iota, p)).results[0]
        iota.name_hint, d.name_hint = "kv_rows", "kv_offset"
        self.pos_cache["d"], self.pos_cache["iota"], self.pos_cache["p"] = d, iota, p
        return d

    def slot(self, length: int) -> SSAValue:
        """`iota == p`, `[1, length]`, i1: the row that receives the new entry."""
        if "slot" not in self.pos_cache:
            self.offset(length)
            iota, p = self.pos_cache["iota"], self.pos_cache["p"]
            slot = self.insert(graph.CmpOp(graph.CmpPredicate.EQ, iota, p)).results[0]
            slot.name_hint = "kv_slot"
            self.pos_cache["slot"] = slot
        return self.pos_cache["slot"]

    def replace_mask(self, length: int) -> None:
        """The attention mask input becomes `j ≤ p`, computed on the wafer."""
        mask = self.arg(self.mask)
        if mask is None:
            raise PlmrError(
                self.where(
                    f"the decode step has no input '{self.mask}': the rows beyond the "
                    "current position must be masked; name the attention mask input with "
                    "mask=NAME (or --mask)"
                )
            )
        shape = static_shape(mask, "mask")
        if shape != (1, length):
            raise PlmrError(
                self.where(
                    f"the attention mask '{self.mask}' has shape {list(shape)}, expected "
                    f"[1, {length}] (one entry per row of the cache)"
                )
            )
        d = self.offset(length)
        one = self.const(np.ones((1, 1), np.float32))
        up = self.insert(graph.ReluOp(self.insert(graph.SubOp(one, d)))).results[0]
        down = self.insert(graph.ReluOp(self.insert(graph.NegOp(d)))).results[0]
        valid = self.insert(graph.SubOp(up, down)).results[0]
        valid.name_hint = "kv_valid"
        for use in list(mask.uses):
            user = use.operation
            if (
                isinstance(user, graph.CastOp)
                and isinstance(element_type(user.result), Float32Type)
                and user.parent_block() is self.fn.body.block
            ):
                Rewriter.replace_op(user, [], [valid])
        if mask.uses:
            typed = valid
            if element_type(mask) != f32:
                typed = self.insert(graph.CastOp(valid, element_type(mask))).results[0]
            mask.replace_all_uses_with(typed)
        self.erase_arg(mask)

    # -- arguments ---------------------------------------------------------------------

    def erase_arg(self, arg: BlockArgument) -> None:
        fn = self.fn
        index = arg.index
        if fn.arg_attrs is not None:
            dicts = list(fn.arg_attrs.data)
            del dicts[index]
            fn.arg_attrs = ArrayAttr(dicts)
        fn.body.block.erase_arg(arg)
        fn.update_function_type()

    def replace_arg(self, arg: BlockArgument, new_type: Attribute, state: str) -> SSAValue:
        fn = self.fn
        index = arg.index
        new = fn.body.block.insert_arg(new_type, index)
        new.name_hint = arg.name_hint
        attrs = fn.arg_attrs
        n = len(fn.body.block.args)
        if attrs is not None:
            dicts = list(attrs.data)
            dicts.insert(index, dicts[index])
            attrs = ArrayAttr(dicts)
        fn.arg_attrs = _set_attr(attrs, n, index, STATE_ATTR, state)
        arg.replace_all_uses_with(new)
        self.erase_arg(arg)
        return new

    def mark_result(self, index: int, state: str) -> None:
        fn = self.fn
        n = len(fn.function_type.outputs.data)
        fn.res_attrs = _set_attr(fn.res_attrs, n, index, STATE_ATTR, state)

    # -- the two forms -----------------------------------------------------------------

    def decode(self, pairs: list[StatePair]) -> None:
        ret = terminator(self.fn.body.block, func.ReturnOp)
        length: int | None = None
        for pair in pairs:
            assert pair.input is not None
            arg = self.arg(pair.input)
            assert arg is not None
            index = self.result_index(pair.output)
            value = ret.operands[index]
            concat = value.owner
            if not (
                isinstance(concat, graph.ConcatOp)
                and len(concat.inputs) == 2
                and concat.inputs[0] is arg
            ):
                raise PlmrError(
                    self.where(
                        f"'{pair.output}' is not Concat('{pair.input}', new row): a cache "
                        "state pair must return its input with one row appended (check "
                        "the pair, or compile the step without state)"
                    )
                )
            if any(use.operation is not concat for use in arg.uses):
                raise PlmrError(
                    self.where(
                        f"'{pair.input}' is read by other ops than the Concat that makes "
                        f"'{pair.output}'; a cache kept on the wafer is only appended to"
                    )
                )
            shape = static_shape(value, "present")
            axis = concat.axis.value.data % len(shape)
            new = concat.inputs[1]
            if static_shape(new, "new")[axis] != 1:
                raise PlmrError(
                    self.where(
                        f"'{pair.output}' appends {static_shape(new, 'new')[axis]} rows to "
                        f"'{pair.input}'; a decode step appends one"
                    )
                )
            if length is None:
                length = shape[axis]
            if shape[axis] != length:
                raise PlmrError(
                    self.where(
                        f"'{pair.output}' holds {shape[axis]} rows, another cache {length}; "
                        "all caches of a step must have one length"
                    )
                )
            if self.capacity and self.capacity != length:
                raise PlmrError(
                    self.where(
                        f"capacity {self.capacity} differs from the export's {length} "
                        "cache rows; export the decode step with a cache of the capacity "
                        "wanted (the rewritten step works at every position below it)"
                    )
                )
            buffer = self.replace_arg(arg, value.type, pair.output)
            bshape = tuple(length if i == axis else 1 for i in range(len(shape)))
            slot = self.insert(graph.ReshapeOp(self.slot(length), bshape)).results[0]
            updated = graph.WhereOp(slot, new, buffer)
            self.fn.body.block.insert_op_before(updated, concat)
            Rewriter.replace_op(concat, [], [updated.result])
            self.mark_result(index, pair.output)
        assert length is not None
        self.replace_mask(length)

    def prefill(self, pairs: list[StatePair]) -> None:
        if not self.capacity:
            raise PlmrError(
                self.where(
                    "a prefill's state needs the capacity of the decode step's cache "
                    "(capacity=S, the decode export's S)"
                )
            )
        ret = terminator(self.fn.body.block, func.ReturnOp)
        for pair in pairs:
            index = self.result_index(pair.output)
            value = ret.operands[index]
            shape = static_shape(value, "present")
            if len(shape) < 2:
                raise PlmrError(
                    self.where(f"'{pair.output}' of shape {list(shape)} is not a cache")
                )
            rows = shape[-2]
            if rows >= self.capacity:
                raise PlmrError(
                    self.where(
                        f"'{pair.output}' has {rows} rows, the capacity {self.capacity} "
                        "leaves no room to decode; use a larger capacity"
                    )
                )
            place = np.eye(self.capacity, rows, dtype=np.float32)
            lead = (1,) * (len(shape) - 2)
            eye = graph.ConstantOp(constant_attr(place.reshape(*lead, *place.shape), f32))
            grown = graph.MatmulOp(eye, value)
            self.fn.body.block.insert_ops_before([eye, grown], ret)
            ret.operands = [
                grown.result if i == index else v for i, v in enumerate(ret.operands)
            ]
            self.mark_result(index, pair.output)
        self.fn.update_function_type()


def _appends_to_input(fn: func.FuncOp, index: int) -> bool:
    """Whether output `index` is a Concat onto an input (a decode step's cache)."""
    ret = fn.body.block.last_op
    if not isinstance(ret, func.ReturnOp):
        return False
    owner = ret.operands[index].owner
    return isinstance(owner, graph.ConcatOp) and any(
        isinstance(v, BlockArgument) for v in owner.inputs
    )


def kv_state(
    module: ModuleOp,
    pairs: list[StatePair] | None = None,
    capacity: int = 0,
    position: str = POSITION,
    mask: str = MASK,
    decode_only: bool = False,
) -> int:
    """
    Rewrites every function's caches (see the module docstring); returns their count.
    Found by name (no `pairs`), a function that already keeps state is left as it is, and
    with `decode_only` so is a prefill (whose state needs the decode step's capacity).
    """
    if capacity < 0:
        raise PlmrError(f"{PASS}: capacity must be positive, got {capacity}")
    count = 0
    for fn in [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]:
        ins, outs = arg_names(fn), result_names(fn)
        if pairs is None and any(state_args(fn)):
            continue
        found = find_pairs(fn) if pairs is None else pairs
        if pairs is None and decode_only and not any(p.input for p in found):
            continue
        decode: list[StatePair] = []
        prefill: list[StatePair] = []
        for pair in found:
            if pair.input is not None and pair.input in ins:
                if pair.output not in outs:
                    raise PlmrError(
                        f"{PASS}: @{fn.sym_name.data}: state pair "
                        f"'{pair.input}={pair.output}': '{pair.output}' is not an output "
                        f"(outputs: {', '.join(outs)})"
                    )
                decode.append(pair)
            elif pair.output in outs:
                if pair.input is not None and _appends_to_input(
                    fn, outs.index(pair.output)
                ):
                    raise PlmrError(
                        f"{PASS}: @{fn.sym_name.data}: state pair "
                        f"'{pair.input}={pair.output}': '{pair.input}' is not an input "
                        f"(inputs: {', '.join(ins)})"
                    )
                prefill.append(pair)
            else:
                raise PlmrError(
                    f"{PASS}: @{fn.sym_name.data}: state pair "
                    f"'{pair.input}={pair.output}' names neither an input nor an output "
                    f"(inputs: {', '.join(ins)}; outputs: {', '.join(outs)})"
                )
        if decode and prefill:
            raise PlmrError(
                f"{PASS}: @{fn.sym_name.data}: '{prefill[0].output}' has no input "
                f"'{prefill[0].input}' while other caches do; every pair of a decode step "
                "names an input and an output"
            )
        rewriter = _Rewriter(fn, capacity, position, mask)
        if decode:
            rewriter.decode(decode)
        elif prefill:
            rewriter.prefill(prefill)
        count += len(decode) + len(prefill)
    if pairs and not count:
        raise PlmrError(f"{PASS}: no function has the state pairs given")
    return count


@dataclass(frozen=True)
class GraphKvStatePass(ModulePass):
    """
    Keeps a decoder export's KV caches on the wafer across steps (module docstring).

    ```mlir
    // before
    func.func @main(%pos: tensor<1x1xi64> {plmr.name = "position_ids"}, %m: tensor<1x4xi64> {plmr.name = "attention_mask"}, %past: tensor<1x2x3x8xf32> {plmr.name = "past_key_values.0.key"}, %k: tensor<1x2x1x8xf32> {plmr.name = "k"}) -> (tensor<1x2x4x8xf32> {plmr.name = "present.0.key"}) {
      %present = graph.concat %past, %k axis = 2 : (tensor<1x2x3x8xf32>, tensor<1x2x1x8xf32>) -> tensor<1x2x4x8xf32>
      func.return %present : tensor<1x2x4x8xf32>
    }
    // after: %past is the buffer (plmr.state = "present.0.key"), row p receives %k
    %kv_slot = graph.cmp eq %kv_rows, %p : (tensor<1x4xf32>, tensor<1x1xf32>) -> tensor<1x4xi1>
    %slot = graph.reshape %kv_slot : tensor<1x4xi1> -> tensor<1x1x4x1xi1>
    %present = graph.where %slot, %k, %past : (tensor<1x1x4x1xi1>, tensor<1x2x1x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    ```
    """

    name = "graph-kv-state"

    state: str = ""
    """`IN=OUT,IN=OUT`: the caches; by default found by their names."""
    capacity: int = 0
    """Rows of every buffer: the decode export's S (0: take it from the export)."""
    position: str = POSITION
    """The input holding the token's position."""
    mask: str = MASK
    """The attention mask input, replaced by `j ≤ position`."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pairs = parse_state_pairs(self.state) if self.state.strip() else None
        kv_state(op, pairs, self.capacity, self.position, self.mask)


__all__ = [
    "GraphKvStatePass",
    "StatePair",
    "find_pairs",
    "kv_state",
    "parse_state_pairs",
]
