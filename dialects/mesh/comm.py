"""
The `mesh` dialect's communication: collectives, point-to-point messages and routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, cast

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i1,
    i64,
)
from xdsl.ir import (
    Attribute,
    Operation,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import (
    HasAncestor,
    HasParent,
)
from xdsl.utils.exceptions import VerifyException

from plmr.dialects.mesh.attrs import (
    Algorithm,
    AlgorithmAttr,
    Axis,
    AxisAttr,
    CombineKind,
    CombineKindAttr,
    Port,
    PortAttr,
    Ring,
    RingAttr,
    axis_size,
    i64_attr,
)
from plmr.dialects.mesh.program import (
    ProgramOp,
    SpmdOp,
    grid_of,
)

# ---------------------------------------------------------------------------------------
# Communication
# ---------------------------------------------------------------------------------------


class CommOp(IRDLOperation):
    """Base of communication ops: they run inside a `mesh.spmd`."""

    def grid(self) -> tuple[int, int]:
        grid = grid_of(self)
        if grid is None:
            raise VerifyException(f"'{self.name}' must be inside a mesh.program")
        return grid


def _verify_segment(op: CommOp, segment: IntegerAttr[IntegerType] | None) -> int:
    """
    The PEs of one segment along the op's axis (the whole axis without `segment`):
    between 1 and the axis size; the positions past the last whole segment idle.
    """
    axis: AxisAttr = getattr(op, "axis")
    n = axis_size(axis.data, op.grid())
    if segment is None:
        return n
    s = segment.value.data
    if not 1 <= s <= n:
        raise VerifyException(
            f"segment must be between 1 and the {n} PEs along {axis.data}, got {s}"
        )
    return s


_COMM_TRAITS = lazy_traits_def(lambda: (HasAncestor(SpmdOp),))


@irdl_op_definition
class ShiftOp(CommOp):
    """
    Cyclic shift along a mesh axis: every PE sends its block to its successor on the ring
    and receives its predecessor's, `distance` times over (a negative distance runs the
    ring backwards). `linear` has no wrap-around
    (the first PE receives zeros); `torus` wraps from the last PE to the first across the
    whole line; `interleaved` folds the ring onto the line so every step is ≤ 2 hops.

    ```mlir
    %a2 = mesh.shift %a axis x ring interleaved : tensor<16x16xf32>
    ```
    """

    name = "mesh.shift"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    axis = prop_def(AxisAttr)
    ring = prop_def(RingAttr)
    distance = prop_def(IntegerAttr[I64], default_value=IntegerAttr(1, i64))
    result = result_def(T)

    traits = _COMM_TRAITS

    assembly_format = (
        "$input `axis` $axis `ring` $ring (`distance` $distance^)? attr-dict `:` "
        "type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        axis: Axis | str,
        ring: Ring | str,
        distance: int = 1,
    ):
        x = SSAValue.get(input)
        super().__init__(
            operands=[x],
            result_types=[x.type],
            properties={
                "axis": AxisAttr(Axis(axis)),
                "ring": RingAttr(Ring(ring)),
                "distance": i64_attr(distance),
            },
        )

    def verify_(self) -> None:
        n = axis_size(self.axis.data, self.grid())
        d = self.distance.value.data
        if d == 0:
            raise VerifyException(
                "shift distance must not be 0 (negative runs the ring backwards)"
            )
        if self.ring.data == Ring.INTERLEAVED and n < 3 and n != 1:
            raise VerifyException(
                f"an interleaved ring needs at least 3 PEs along {self.axis.data}, got {n} "
                "(use ring torus for 2)"
            )


@irdl_op_definition
class BroadcastOp(CommOp):
    """
    Every PE along `axis` receives the block of the PE at position `root` on that axis
    (a hardware multicast along the line). With `segment = S` the axis is cut into
    consecutive segments of S PEs, each multicasting from its own position `root`
    (0 <= root < S); the PEs past the last whole segment keep their block.

    ```mlir
    %b = mesh.broadcast %a axis x root %k : tensor<16x16xf32>
    %c = mesh.broadcast %a axis y root %k segment = 4 : tensor<16x16xf32>
    ```
    """

    name = "mesh.broadcast"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    axis = prop_def(AxisAttr)
    root = operand_def(IndexType)
    segment = opt_prop_def(IntegerAttr[I64])
    result = result_def(T)

    traits = _COMM_TRAITS

    assembly_format = (
        "$input `axis` $axis `root` $root (`segment` `=` $segment^)? attr-dict "
        "`:` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        axis: Axis | str,
        root: SSAValue | Operation,
        segment: int | None = None,
    ):
        x = SSAValue.get(input)
        props: dict[str, Attribute] = {"axis": AxisAttr(Axis(axis))}
        if segment is not None:
            props["segment"] = i64_attr(segment)
        super().__init__(operands=[x, root], result_types=[x.type], properties=props)

    def verify_(self) -> None:
        _verify_segment(self, self.segment)


@irdl_op_definition
class DiagonalBroadcastOp(CommOp):
    """
    Every PE receives the block of the PE on its line along `axis` whose position there
    equals the PE's own coordinate on the other axis: the diagonal PE of each line
    multicasts its block along the line (a block split over one axis, wanted over the
    other). Each line has its own root, so the grid must be square; one color carries
    every line's multicast.

    ```mlir
    %b = mesh.diagonal_broadcast %a axis x : tensor<9x128xf32>
    ```
    """

    name = "mesh.diagonal_broadcast"

    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    axis = prop_def(AxisAttr)
    result = result_def(T)

    traits = _COMM_TRAITS

    assembly_format = "$input `axis` $axis attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: Axis | str):
        x = SSAValue.get(input)
        super().__init__(
            operands=[x], result_types=[x.type], properties={"axis": AxisAttr(Axis(axis))}
        )

    def verify_(self) -> None:
        rows, cols = self.grid()
        if rows != cols:
            raise VerifyException(
                f"a diagonal broadcast needs a square grid (each line's root is its "
                f"coordinate on the other axis), got {rows}x{cols}"
            )


class _ReductionOp(CommOp):
    T: ClassVar = VarConstraint("T", base(TensorType))

    kind = prop_def(CombineKindAttr)
    input = operand_def(T)
    axis = prop_def(AxisAttr)
    algorithm = prop_def(AlgorithmAttr, default_value=AlgorithmAttr(Algorithm.KTREE))
    k = prop_def(IntegerAttr[I64], default_value=IntegerAttr(2, i64))
    groups = opt_prop_def(IntegerAttr[I64])
    segment = opt_prop_def(IntegerAttr[I64])
    result = result_def(T)

    def verify_(self) -> None:
        n = _verify_segment(self, self.segment)
        if self.kind.data == CombineKind.SOFTMAX:
            t = self.input.type
            assert isinstance(t, TensorType)
            shape: tuple[int, ...] = t.get_shape()
            if len(shape) < 2 or shape[-1] < 2:
                raise VerifyException(
                    "a softmax combine needs blocks of rows [m, l, o...] along the last "
                    f"axis (rank >= 2, last dimension >= 2), got shape {list(shape)}"
                )
            if self.algorithm.data == Algorithm.RING:
                raise VerifyException(
                    "a softmax combine cannot use the ring algorithm (its reduce-scatter "
                    "splits rows); use ktree or pipeline"
                )
        if self.k.value.data < 1:
            raise VerifyException(f"k must be >= 1, got {self.k.value.data}")
        if self.groups is not None:
            g = self.groups.value.data
            if not 1 <= g <= n:
                where = "of a segment along" if self.segment is not None else "along"
                raise VerifyException(
                    f"groups must be between 1 and the {n} PEs {where} {self.axis.data}, "
                    f"got {g}"
                )
            if self.algorithm.data != Algorithm.KTREE:
                raise VerifyException("groups only apply to the ktree algorithm")
            if self.k.value.data < 2 and g != 1:
                raise VerifyException(
                    f"groups = {g} needs k >= 2 (with k = 1 there is a single group)"
                )


@irdl_op_definition
class AllreduceOp(_ReductionOp):
    """
    Combines the blocks of all PEs along `axis`; every PE receives the result.
    `ktree` (default, K = 2) reduces within groups, then across group roots, then
    multicasts; `groups` sets the number of groups of the first phase (default ≈ √n).
    With `segment = S` the axis is cut into consecutive segments of S PEs, each
    allreducing its own blocks (`groups` then counts a segment's groups); the PEs past
    the last whole segment keep their block.

    ```mlir
    %s = mesh.allreduce sum %p axis y algorithm ktree groups = 4 : tensor<1x16xf32>
    %m = mesh.allreduce max %p axis x algorithm pipeline : tensor<16x1xf32>
    %h = mesh.allreduce sum %p axis y segment = 52 : tensor<4x10xf32>
    %f = mesh.allreduce softmax %mlo axis y : tensor<8x18xf32>
    ```

    `softmax` combines rows `[m, l, o...]` (split-K attention's partial maximum, sum and
    outputs) with the rescaling of flash-decoding, in one collective.
    """

    name = "mesh.allreduce"

    traits = _COMM_TRAITS

    assembly_format = (
        "$kind $input `axis` $axis (`algorithm` $algorithm^)? (`k` `=` $k^)? "
        "(`groups` `=` $groups^)? (`segment` `=` $segment^)? attr-dict `:` type($result)"
    )

    def __init__(
        self,
        kind: CombineKind | str,
        input: SSAValue | Operation,
        axis: Axis | str,
        algorithm: Algorithm | str = Algorithm.KTREE,
        k: int = 2,
        groups: int | None = None,
        segment: int | None = None,
    ):
        x = SSAValue.get(input)
        props: dict[str, Attribute] = {
            "kind": CombineKindAttr(CombineKind(kind)),
            "axis": AxisAttr(Axis(axis)),
            "algorithm": AlgorithmAttr(Algorithm(algorithm)),
            "k": i64_attr(k),
        }
        if groups is not None:
            props["groups"] = i64_attr(groups)
        if segment is not None:
            props["segment"] = i64_attr(segment)
        super().__init__(operands=[x], result_types=[x.type], properties=props)


@irdl_op_definition
class ReduceOp(_ReductionOp):
    """
    Combines the blocks of all PEs along `axis` into the PE at position `root`; the
    other PEs' results are zero. With `segment = S` every segment of S consecutive PEs
    reduces into its own position `root` (0 <= root < S); the PEs past the last whole
    segment take no part (their result is zero).

    ```mlir
    %s = mesh.reduce sum %p axis y root %r : tensor<1x16xf32>
    %t = mesh.reduce sum %p axis y root %r segment = 8 : tensor<1x16xf32>
    ```
    """

    name = "mesh.reduce"

    root = operand_def(IndexType)

    traits = _COMM_TRAITS

    assembly_format = (
        "$kind $input `axis` $axis `root` $root (`algorithm` $algorithm^)? "
        "(`k` `=` $k^)? (`groups` `=` $groups^)? (`segment` `=` $segment^)? attr-dict "
        "`:` type($result)"
    )

    def __init__(
        self,
        kind: CombineKind | str,
        input: SSAValue | Operation,
        axis: Axis | str,
        root: SSAValue | Operation,
        algorithm: Algorithm | str = Algorithm.KTREE,
        k: int = 2,
        segment: int | None = None,
    ):
        x = SSAValue.get(input)
        props: dict[str, Attribute] = {
            "kind": CombineKindAttr(CombineKind(kind)),
            "axis": AxisAttr(Axis(axis)),
            "algorithm": AlgorithmAttr(Algorithm(algorithm)),
            "k": i64_attr(k),
        }
        if segment is not None:
            props["segment"] = i64_attr(segment)
        super().__init__(operands=[root, x], result_types=[x.type], properties=props)


@irdl_op_definition
class AllgatherOp(CommOp):
    """
    Concatenates along dimension `dim` the blocks of the first `n` PEs along `axis`,
    where `n` is the result's size along `dim` over the input's; every PE of the line
    receives the concatenation (the PEs past the first `n` contribute nothing). The
    transfers are an allreduce's (`ktree` or `pipeline`, with `k` and `groups`), but the
    receivers append what arrives instead of combining it: no arithmetic, and the chains
    stream the growing block.

    ```mlir
    %w = mesh.allgather %strip axis x dim 1 k = 3 : tensor<9x1xf32> -> tensor<9x128xf32>
    ```
    """

    name = "mesh.allgather"

    input = operand_def(TensorType)
    axis = prop_def(AxisAttr)
    dim = prop_def(IntegerAttr[I64])
    algorithm = prop_def(AlgorithmAttr, default_value=AlgorithmAttr(Algorithm.KTREE))
    k = prop_def(IntegerAttr[I64], default_value=IntegerAttr(2, i64))
    groups = opt_prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    traits = _COMM_TRAITS

    assembly_format = (
        "$input `axis` $axis `dim` $dim (`algorithm` $algorithm^)? (`k` `=` $k^)? "
        "(`groups` `=` $groups^)? attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        axis: Axis | str,
        dim: int,
        owners: int,
        algorithm: Algorithm | str = Algorithm.KTREE,
        k: int = 2,
        groups: int | None = None,
    ):
        x = SSAValue.get(input)
        t = cast(TensorType[Attribute], x.type)
        shape = list(t.get_shape())
        shape[dim] *= owners
        props: dict[str, Attribute] = {
            "axis": AxisAttr(Axis(axis)),
            "dim": i64_attr(dim),
            "algorithm": AlgorithmAttr(Algorithm(algorithm)),
            "k": i64_attr(k),
        }
        if groups is not None:
            props["groups"] = i64_attr(groups)
        super().__init__(
            operands=[x],
            result_types=[TensorType(t.get_element_type(), shape)],
            properties=props,
        )

    def _types(self) -> tuple[TensorType[Attribute], TensorType[Attribute]]:
        # The operand and result definitions admit tensors only.
        return cast(TensorType[Attribute], self.input.type), self.result.type

    def owners(self) -> int:
        """How many PEs along the axis contribute a block."""
        t_in, t_out = self._types()
        d = self.dim.value.data
        return t_out.get_shape()[d] // max(1, t_in.get_shape()[d])

    def verify_(self) -> None:
        t_in, t_out = self._types()
        a: tuple[int, ...] = t_in.get_shape()
        b: tuple[int, ...] = t_out.get_shape()
        if t_in.get_element_type() != t_out.get_element_type():
            raise VerifyException(
                f"the result's element type {t_out.get_element_type()} must be the "
                f"input's, {t_in.get_element_type()}"
            )
        d = self.dim.value.data
        if not 0 <= d < len(a) or len(a) != len(b):
            raise VerifyException(
                f"dim {d} must be a dimension of the input (rank {len(a)}) and the "
                f"result must have the same rank, got {len(b)}"
            )
        if any(x != y for j, (x, y) in enumerate(zip(a, b)) if j != d):
            raise VerifyException(
                f"input {list(a)} and result {list(b)} may differ only along dim {d}"
            )
        n = axis_size(self.axis.data, self.grid())
        if a[d] < 1 or b[d] % a[d] or not 1 <= b[d] // a[d] <= n:
            raise VerifyException(
                f"the result's dim {d} ({b[d]}) must be the input's ({a[d]}) times the "
                f"PEs contributing, between 1 and the {n} PEs along {self.axis.data}"
            )
        if self.algorithm.data == Algorithm.RING:
            raise VerifyException("an allgather runs ktree or pipeline, not ring")
        k = self.k.value.data
        if k < 1:
            raise VerifyException(f"k must be >= 1, got {k}")
        if self.groups is not None:
            g = self.groups.value.data
            if not 1 <= g <= n:
                raise VerifyException(
                    f"groups must be between 1 and the {n} PEs along {self.axis.data}, "
                    f"got {g}"
                )
            if self.algorithm.data != Algorithm.KTREE:
                raise VerifyException("groups only apply to the ktree algorithm")
            if k < 2 and g != 1:
                raise VerifyException(
                    f"groups = {g} needs k >= 2 (with k = 1 there is a single group)"
                )


def segment_of(op: Operation, grid: Sequence[int]) -> int:
    """PEs per segment of a collective along its axis (the axis size if unsegmented)."""
    if isinstance(op, BroadcastOp | AllreduceOp | ReduceOp) and op.segment is not None:
        return op.segment.value.data
    axis: AxisAttr = getattr(op, "axis")
    return axis_size(axis.data, grid)


@irdl_op_definition
class SendOp(CommOp):
    """
    Sends the PE's block on a color: the routers' rules for that color decide where it
    goes. With `if %p`, only the PEs where `%p` holds send.

    ```mlir
    mesh.send %a color 3 : tensor<16x16xf32>
    mesh.send %a color 4 if %first : tensor<16x16xf32>
    ```
    """

    name = "mesh.send"

    input = operand_def(TensorType)
    color = prop_def(IntegerAttr[I64])
    mask = opt_operand_def(i1)

    traits = _COMM_TRAITS

    assembly_format = "$input `color` $color (`if` $mask^)? attr-dict `:` type($input)"

    def __init__(
        self,
        input: SSAValue | Operation,
        color: int,
        mask: SSAValue | Operation | None = None,
    ):
        super().__init__(
            operands=[input, [] if mask is None else [mask]],
            properties={"color": i64_attr(color)},
        )

    def verify_(self) -> None:
        if self.color.value.data < 0:
            raise VerifyException(f"color must be >= 0, got {self.color.value.data}")
        self.grid()


@irdl_op_definition
class RecvOp(CommOp):
    """
    Receives a block arriving on a color at the PE's ramp. With `if %p`, only the PEs
    where `%p` holds receive (the others' results are zero). A receive that no send can
    reach is a deadlock.

    ```mlir
    %b = mesh.recv color 3 : tensor<16x16xf32>
    ```
    """

    name = "mesh.recv"

    color = prop_def(IntegerAttr[I64])
    mask = opt_operand_def(i1)
    result = result_def(TensorType)

    traits = _COMM_TRAITS

    assembly_format = "`color` $color (`if` $mask^)? attr-dict `:` type($result)"

    def __init__(
        self, result_type: Attribute, color: int, mask: SSAValue | Operation | None = None
    ):
        super().__init__(
            operands=[[] if mask is None else [mask]],
            result_types=[result_type],
            properties={"color": i64_attr(color)},
        )

    def verify_(self) -> None:
        if self.color.value.data < 0:
            raise VerifyException(f"color must be >= 0, got {self.color.value.data}")
        self.grid()


@irdl_op_definition
class RouteOp(IRDLOperation):
    """
    A static route rule: the routers in rows `rows = [start, stop, step]` and columns
    `cols = [start, stop, step]` forward `color` arriving from port `from` to the ports
    `to` (several ports: a multicast; `ramp`: deliver to the PE).

    ```mlir
    mesh.route color 3 rows [0, 4, 1] cols [0, 3, 1] from ramp to ["east"]
    ```
    """

    name = "mesh.route"

    color = prop_def(IntegerAttr[I64])
    rows = prop_def(DenseArrayBase.constr(I64))
    cols = prop_def(DenseArrayBase.constr(I64))
    rx = prop_def(PortAttr, prop_name="from")
    tx = prop_def(ArrayAttr[StringAttr], prop_name="to")

    traits = traits_def(HasParent(ProgramOp))

    assembly_format = (
        "`color` $color `rows` $rows `cols` $cols `from` $from `to` $to attr-dict"
    )

    def __init__(
        self,
        color: int,
        rows: tuple[int, int, int],
        cols: tuple[int, int, int],
        rx: Port | str,
        tx: Sequence[Port | str],
    ):
        super().__init__(
            properties={
                "color": i64_attr(color),
                "rows": DenseArrayBase.from_list(i64, list(rows)),
                "cols": DenseArrayBase.from_list(i64, list(cols)),
                "from": PortAttr(Port(rx)),
                "to": ArrayAttr([StringAttr(Port(t).value) for t in tx]),
            }
        )

    @property
    def tx_ports(self) -> tuple[Port, ...]:
        return tuple(Port(t.data) for t in self.tx.data)

    def verify_(self) -> None:
        for name, r in (("rows", self.rows), ("cols", self.cols)):
            v = r.get_values()
            if len(v) != 3 or v[2] <= 0 or v[0] < 0 or v[1] < v[0]:
                raise VerifyException(
                    f"{name} must be [start, stop, step] with 0 <= start <= stop and "
                    f"step > 0, got {list(v)}"
                )
        ports = [t.data for t in self.tx.data]
        for p in ports:
            if p not in {q.value for q in Port}:
                raise VerifyException(
                    f"unknown port '{p}' (ports: ramp, north, south, east, west)"
                )
        if not ports:
            raise VerifyException("a route needs at least one output port")
        if len(set(ports)) != len(ports):
            raise VerifyException(f"output ports {ports} repeat a port")
        if self.rx.data.value in ports and self.rx.data != Port.RAMP:
            raise VerifyException(
                f"a route cannot send {self.rx.data} back where it came from"
            )
        grid = grid_of(self)
        if grid is not None:
            rows, cols = self.rows.get_values(), self.cols.get_values()
            if rows[1] > grid[0] or cols[1] > grid[1]:
                raise VerifyException(
                    f"route covers rows {list(rows)} cols {list(cols)} outside the "
                    f"{grid[0]}x{grid[1]} grid"
                )
