"""
The mesh runtime: executes a `mesh.program` on a modelled wafer.

SPMD and vectorised: inside `mesh.spmd`, every value is one numpy array whose leading
axes are the grid `(rows, cols)`, so each op runs once for all PEs (the tile ops'
reference semantics with `lead = (rows, cols)`). Two modes share the interpreter:
`functional` carries data and computes exact numbers; `timing` carries shapes only
(zero-stride placeholder arrays), so full-wafer grids fit in memory.

Time: every PE has a clock. A compute op advances it by its per-op overhead plus
`ceil(flops / SIMD width)` (or its SRAM traffic, if larger). A collective runs its plan
(`plmr.target.collectives`) stage by stage: a message leaves when its sender reaches
the op, pays the send overhead, the ramp twice, one `hop_cycles` per router, and one
cycle per 32-bit wavelet (times the load of the busiest link on its path, for
contention; once per chain for streamed chains); a receiver waits for its message and
then combines it. Point-to-point `mesh.send` / `mesh.recv` follow the route rules; a
receive that no message can satisfy is a deadlock, reported with the waiting PEs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from plmr.dialects import mesh, tile
from plmr.dialects.graph import normalize_axis, static_shape
from plmr.dialects.graph_weights import weight_ref
from plmr.dialects.narrow import type_of
from plmr.errors import PlmrError
from plmr.runtime.collective_moves import collective_data, flow_control
from plmr.runtime.host_nests import computed_on_host, is_host_op, run_host_op
from plmr.runtime.layer_repeat import LayerRepeat, LayerRunner, chain_power, chain_run
from plmr.runtime.memory import check_host_memory
from plmr.runtime.placement import chunk_index, gather_array, scatter_array, skew_index
from plmr.runtime.report import OpTime, Report
from plmr.runtime.spmd import CLOCK, Clocks, FloatArray, Ready, SpmdEvaluator, Traffic
from plmr.runtime.spmd import Pending as _Pending
from plmr.runtime.state import Resident, StateInput, WaferState
from plmr.runtime.steady import (
    STAGES,
    Extrapolated,
    ExtrapolationLog,
    external_operands,
    iteration_invariant,
)
from plmr.runtime.tile_ops import lookup_rows
from plmr.runtime.trace import TraceRecorder
from plmr.runtime.weights import load_weight
from plmr.target.collective_stages import (
    StageArrays,
    combine_cycles,
    stage_arrays,
)
from plmr.target.device import Device, get_device
from plmr.target.interface import state_args, state_results, weight_args
from plmr.target.op_cost import op_cycles
from plmr.target.routing import RouteTable
from plmr.target.sram import SramReport, spmd_sram
from plmr.values import Array, dense_to_numpy, tensor_dtype

MODES = ("functional", "timing")


@dataclass
class MeshRuntime:
    """Executes mesh programs on a device model."""

    device: Device
    mode: str = "functional"
    relay: bool = False
    grid: tuple[int, int] = (0, 0)
    clocks: Clocks = field(default_factory=lambda: Clocks.zeros((1, 1)))
    traffic: Traffic = field(default_factory=Traffic)
    op_times: dict[str, OpTime] = field(default_factory=dict[str, OpTime])
    table: RouteTable | None = None
    relayed: set[Operation] = field(default_factory=set[Operation])
    sram: SramReport = field(default_factory=SramReport)
    _plans: dict[tuple[int, int | None], list[StageArrays]] = field(
        default_factory=dict[tuple[int, int | None], list[StageArrays]]
    )
    _pending: dict[int, list[_Pending]] = field(default_factory=dict[int, list[_Pending]])
    recorder: TraceRecorder | None = None
    """Collects a timeline of selected PEs (for --trace)."""
    track_busy: bool | None = None
    """Keep the per-PE sum of communication durations (two more passes per collective);
    by default only on grids up to 256×256 PEs, where it is cheap."""
    _cycles: dict[Operation, float] = field(default_factory=dict[Operation, float])
    _elems: dict[Operation, int] = field(default_factory=dict[Operation, int])
    _placeholders: dict[SSAValue, Array] = field(default_factory=dict[SSAValue, Array])
    _last_issue: dict[Operation, FloatArray] = field(
        default_factory=dict[Operation, FloatArray]
    )
    exact: bool = False
    """Step every loop iteration; by default timing mode extrapolates periodic loops
    (`plmr.runtime.steady`). Functional mode always steps."""
    extrapolation: ExtrapolationLog = field(default_factory=ExtrapolationLog)
    _invariant: dict[Operation, bool] = field(default_factory=dict[Operation, bool])
    _externals: dict[Operation, list[SSAValue]] = field(
        default_factory=dict[Operation, list[SSAValue]]
    )
    state: WaferState | None = None
    """Named state kept on the wafer across runs (`plmr.runtime.state`): the program's
    state inputs are taken from it (`inputs` then holds the host inputs only) and its
    state outputs are left in it."""
    _host_in: float = 0.0
    _host_out: float = 0.0
    _state_moved: float = 0.0
    _state_args: dict[SSAValue, StateInput] = field(
        default_factory=dict[SSAValue, StateInput]
    )
    _weight_args: set[int] = field(default_factory=set[int])
    """The program's inputs that are model weights, placed when the model is loaded."""
    host_lookup_bytes: int = 0
    """Bytes of rows looked up on the host (`tile.lookup`) and streamed in, per run."""
    host_lookup_cycles: float = 0.0
    """Their cycles on the host link (one wavelet per cycle)."""
    layers: LayerRepeat | None = None
    """Timing mode: run the program's window of one layer for every further layer of
    the model (`plmr.runtime.layer_repeat.LayerRepeat`), extrapolating once layers repeat."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise PlmrError(f"unknown mode '{self.mode}' (functional or timing)")

    # -- entry point ---------------------------------------------------------------------

    def run(
        self, module: ModuleOp, name: str | None, inputs: Sequence[Array]
    ) -> tuple[list[Array], Report]:
        program = find_program(module, name)
        return self.run_program(program, inputs)

    def run_program(
        self, program: mesh.ProgramOp, inputs: Sequence[Array]
    ) -> tuple[list[Array], Report]:
        from plmr.target.route_plan import program_routing

        started = time.perf_counter()
        self.grid = program.grid_shape
        rows, cols = self.grid
        if rows > self.device.height or cols > self.device.width:
            raise PlmrError(
                f"@{program.sym_name.data} needs a {rows}x{cols} grid, but {self.device.name} "
                f"has {self.device.height}x{self.device.width} PEs"
            )
        self.clocks = Clocks.zeros(self.grid)
        if self.track_busy is None:
            self.track_busy = rows * cols <= 256 * 256
        self.traffic = Traffic()
        self.op_times = {}
        self._plans = {}
        self._pending = {}
        self._last_issue = {}
        self._placeholders = {}
        self._host_in = self._host_out = self._state_moved = 0.0
        self._state_args = {}
        self._weight_args = weight_args(program)
        self.extrapolation = ExtrapolationLog()
        routing = program_routing(program, self.relay, self.device)
        self.table = routing.table
        self.relayed = routing.relayed
        counts = routing.table.colors_per_router()
        max_routes = int(counts.max()) if counts.size else 0
        if max_routes > self.device.usable_colors and not self.relay:
            y, x = np.unravel_index(int(np.argmax(counts)), counts.shape)
            raise PlmrError(
                f"router ({y}, {x}) of @{program.sym_name.data} needs {max_routes} colors, "
                f"but {self.device.name} routes at most {self.device.usable_colors} "
                "(use relay mode or fewer routes)"
            )
        check_host_memory(program, self.mode)
        self.host_lookup_bytes, self.host_lookup_cycles = 0, 0.0
        self.sram = SramReport()
        for spmd in [op for op in program.walk() if isinstance(op, mesh.SpmdOp)]:
            report = spmd_sram(spmd, self.device)
            if report.peak_bytes > self.sram.peak_bytes:
                self.sram = report
        if self.sram.peak_bytes > self.device.sram_bytes:
            live = ", ".join(f"{n} ({b} B)" for n, b in self.sram.live[:8])
            raise PlmrError(
                f"SRAM overflow in @{program.sym_name.data}: every PE (e.g. PE (0, 0)) needs "
                f"{self.sram.peak_bytes} B at `{self.sram.at}`, but {self.device.name} has "
                f"{self.device.sram_bytes} B per PE; live: {live}. Use a larger grid or "
                "smaller blocks"
            )
        outputs = self._execute(program, inputs)
        leftover = [c for c, q in self._pending.items() if q]
        if leftover:
            raise PlmrError(
                f"messages on color {leftover[0]} were sent but never received (a "
                "mesh.recv is missing)"
            )
        finish = np.maximum(self.clocks.finish, self.clocks.ce_free)
        report = Report.build(
            program.sym_name.data,
            self.device,
            self.grid,
            self.mode,
            finish,
            np.full(self.grid, self.clocks.compute, dtype=CLOCK),
            self.clocks.comm_busy if self.track_busy else None,
            self.traffic.bytes,
            self.traffic.hop_bytes,
            self.sram,
            max_routes,
            self.op_times,
            time.perf_counter() - started,
        )
        report.relayed_collectives = len(self.relayed)
        report.host_lookup_bytes = self.host_lookup_bytes
        report.host_lookup_cycles = self.host_lookup_cycles
        report.exact = self.exact or self.mode != "timing"
        report.extrapolated_loops = self.extrapolation.loops
        report.extrapolated_iterations = self.extrapolation.iterations
        report.extrapolated_layers = self.extrapolation.layers
        report.extrapolated_stages = self.extrapolation.stages
        report.simulated_layers = self.extrapolation.simulated_layers
        report.host_in_bytes = self._host_in
        report.host_out_bytes = self._host_out
        report.state_moved_bytes = self._state_moved
        report.resident_bytes = self.state.nbytes if self.state is not None else 0
        return outputs, report

    def _execute(self, program: mesh.ProgramOp, inputs: Sequence[Array]) -> list[Array]:
        block = program.body.block
        states = state_args(program) if self.state is not None else []
        host_args = [
            a
            for a, s in zip(block.args, states or [None] * len(block.args), strict=True)
            if s is None
        ]
        for arg, name in zip(block.args, states or [None] * len(block.args), strict=True):
            if name is not None:
                t = type_of(arg, TensorType)
                dtype = np.dtype(tensor_dtype(cast(Attribute, t)))
                self._state_args[arg] = StateInput(name, static_shape(arg, "input"), dtype)
        if len(inputs) != len(host_args):
            kept = (
                f" (and {len(self._state_args)} kept on the wafer)"
                if self._state_args
                else ""
            )
            raise PlmrError(
                f"@{program.sym_name.data} takes {len(host_args)} host inputs{kept}, got "
                f"{len(inputs)}"
            )
        env: dict[SSAValue, Any] = {}
        ready: dict[SSAValue, Ready] = {}
        for arg, value in zip(host_args, inputs, strict=True):
            want = static_shape(arg, "input")
            if tuple(np.shape(value)) != want:
                raise PlmrError(
                    f"input %{arg.name_hint or '?'} has shape {np.shape(value)}, expected {want}"
                )
            env[arg] = np.asarray(value)
        ops = list(block.ops)
        layers: LayerRunner | None = None
        for index, op in enumerate(ops):
            if isinstance(op, mesh.ReturnOp):
                return self._return(program, op, env, state_results(program))
            if self.layers is not None and index == self.layers.start:
                layers = LayerRunner(self, program, ops, self.layers)
            self.program_op(program, op, env, ready)
            if layers is not None and index == layers.plan.stop - 1:
                # The window of one layer ran once; run it for the model's other layers.
                layers.run(env, ready)
        raise PlmrError(f"@{program.sym_name.data} has no mesh.return")

    def program_op(
        self,
        program: mesh.ProgramOp,
        op: Operation,
        env: dict[SSAValue, Any],
        ready: dict[SSAValue, Ready],
    ) -> None:
        """Runs one op of a program's body (not its mesh.return)."""
        if isinstance(op, mesh.RouteOp):
            return
        if isinstance(op, arith.ConstantOp) and isinstance(
            op.value, DenseIntOrFPElementsAttr
        ):
            # A host constant (e.g. a weight), placed by a later mesh.scatter.
            env[op.result] = dense_to_numpy(op.value)
        elif (ref := weight_ref(op)) is not None:
            # A weight by reference: mapped from its file when the data is needed; a
            # timing run moves shapes only and never opens it.
            value = op.results[0]
            if self.mode == "timing":
                env[value] = self.placeholder(value)[(0,) * len(self.grid)]
            else:
                env[value] = load_weight(ref)
        elif isinstance(op, tile.LookupOp):
            env[op.result] = self._lookup(op, env[op.table], env[op.ids])
        elif is_host_op(op):
            run_host_op(op, env)
        elif isinstance(op, mesh.ScatterOp):
            want = self._state_args.get(op.input)
            if want is not None and self.state is not None:
                d = type_of(op.result, mesh.DistType)
                pad = 0.0 if op.pad is None else op.pad.value.data
                blocks, moved, cycles = self.state.place(
                    want, d, self.grid, self.mode == "timing", self.device, pad
                )
                env[op.result] = blocks
                self._state_moved += moved
                if cycles:
                    # Re-laid out on the wafer: ready for its nests after the moves.
                    ready[op.result] = cycles
                    self.account(op, cycles)
            else:
                env[op.result] = self._scatter(op, env[op.input])
                if (
                    isinstance(op.input, BlockArgument)
                    and op.input.index not in self._weight_args
                ) or computed_on_host(op.input):
                    d = type_of(op.result, mesh.DistType)
                    self._host_in += _tensor_bytes(d.tensor)
        elif isinstance(op, mesh.GatherOp):
            env[op.result] = self._gather(op, env[op.input])
        elif isinstance(op, mesh.SpmdOp):
            ev = SpmdEvaluator(self, program)
            args = list(op.body.block.args)
            for arg, value in zip(args[2:], op.inputs, strict=True):
                ev.ready[arg] = ready.get(value, 0.0)
            yy, xx = np.indices(self.grid, dtype=np.int64)
            results = ev.run_block(op.body.block, [yy, xx, *(env[v] for v in op.inputs)])
            yield_op = op.body.block.last_op
            assert yield_op is not None
            for value, result, yielded in zip(
                op.outputs, results, yield_op.operands, strict=True
            ):
                env[value] = result
                r = ev.ready.get(yielded, 0.0)
                ready[value] = r
                self.clocks.finish = np.maximum(self.clocks.finish, r)
        else:
            raise PlmrError(
                f"'{op.name}' cannot appear directly in a mesh.program (put it inside "
                "a mesh.spmd body)"
            )

    def _return(
        self,
        program: mesh.ProgramOp,
        op: mesh.ReturnOp,
        env: dict[SSAValue, Any],
        states: Sequence[str | None],
    ) -> list[Array]:
        """The results; with a `WaferState`, state results stay on the wafer."""
        out: list[Array] = []
        for value, name in zip(op.values, states, strict=True):
            out.append(env[value])
            if name is None or self.state is None:
                self._host_out += _tensor_bytes(type_of(value, TensorType))
                continue
            shape = static_shape(value, "result")
            owner = value.owner
            if isinstance(owner, mesh.GatherOp):
                d = type_of(owner.input, mesh.DistType)
                kept = Resident(shape, self.grid, env[owner.input], d.layout)
            else:
                kept = Resident(shape, self.grid, np.asarray(env[value]), None)
            self.state.keep(name, kept)
        return out

    # -- steady-state extrapolation (plmr.runtime.steady) --------------------------------

    def loop_invariant(self, op: tile.ForOp) -> bool:
        cached = self._invariant.get(op)
        if cached is None:
            cached = self._invariant[op] = iteration_invariant(op)
        return cached

    def loop_externals(self, op: tile.ForOp) -> list[SSAValue]:
        cached = self._externals.get(op)
        if cached is None:
            cached = self._externals[op] = external_operands(op)
        return cached

    def forget_issue(self, op: Operation) -> None:
        """Drops a collective's flow-control state (the next run is another op's)."""
        self._last_issue.pop(op, None)

    def on_layer(self, layer: int) -> None:
        """Called before the window of one layer runs again for layer `layer`."""

    def pending_messages(self) -> list[list[_Pending]]:
        return list(self._pending.values())

    def last_issue(self, op: Operation) -> FloatArray | None:
        return self._last_issue.get(op)

    def set_last_issue(self, op: Operation, issue: FloatArray) -> None:
        self._last_issue[op] = issue

    def log_extrapolation(self, jump: Extrapolated) -> None:
        self.extrapolation.add(jump)
        if self.recorder is not None:
            self.recorder.record_extrapolated(
                jump.what, jump.iterations, jump.start, jump.end, self.grid
            )

    # -- data placement --------------------------------------------------------------

    def placeholder(self, value: SSAValue) -> Array:
        """A zero-stride array with the value's per-PE shape (timing mode)."""
        cached = self._placeholders.get(value)
        if cached is None:
            cached = self._make_placeholder(value)
            self._placeholders[value] = cached
        return cached

    def _make_placeholder(self, value: SSAValue) -> Array:
        t = value.type
        if not isinstance(t, TensorType):
            return np.zeros(self.grid, dtype=np.int64)
        shape = self.grid + static_shape(value, "value")
        return np.broadcast_to(np.zeros((), dtype=tensor_dtype(cast(Attribute, t))), shape)

    def _lookup(self, op: tile.LookupOp, table: Array, ids: Array) -> Array:
        """
        Rows looked up on the host (never the table on the wafer): their bytes cross
        the host link, one wavelet of `link_bytes_per_cycle` per cycle. Timing mode
        reads neither the table nor the ids.
        """
        nbytes = tile.nbytes(op.result.type)
        self.host_lookup_bytes += nbytes
        self.host_lookup_cycles += nbytes / self.device.link_bytes_per_cycle
        if self.mode == "timing":
            shape = static_shape(op.result, "result")
            return np.broadcast_to(np.zeros((), dtype=table.dtype), shape)
        axis = normalize_axis(op.axis.value.data, table.ndim)
        return lookup_rows(table, ids, axis)

    def _scatter(self, op: mesh.ScatterOp, x: Array) -> Array:
        d = type_of(op.result, mesh.DistType)
        if self.mode == "timing":
            block = d.block_shape(self.grid)
            return np.broadcast_to(np.zeros((), dtype=x.dtype), self.grid + block)
        pad = 0.0 if op.pad is None else op.pad.value.data
        if op.offsets is not None:
            # A slice of the host tensor (one head's weights).
            shape = d.tensor.get_shape()
            starts = op.offsets.get_values()
            x = x[tuple(slice(o, o + n) for o, n in zip(starts, shape, strict=True))]
        return scatter_array(x, d.layout, self.grid, pad)

    def _gather(self, op: mesh.GatherOp, blocks: Array) -> Array:
        d = type_of(op.input, mesh.DistType)
        shape = d.tensor.get_shape()
        if self.mode == "timing":
            return np.broadcast_to(np.zeros((), dtype=blocks.dtype), shape)
        return gather_array(blocks, d.layout, shape, self.grid)

    # -- compute -------------------------------------------------------------------------

    def compute_cycles(self, op: Operation) -> float:
        cached = self._cycles.get(op)
        if cached is None:
            cached = self._compute_cycles(op)
            self._cycles[op] = cached
        return cached

    def _compute_cycles(self, op: Operation) -> float:
        return op_cycles(self.device, op)

    def account(self, op: Operation, cycles: float | FloatArray) -> None:
        entry = self.op_times.setdefault(op.name, OpTime(op.name))
        entry.count += 1
        entry.cycles += float(np.max(cycles))

    # -- collectives ---------------------------------------------------------------------

    def collective_data(self, op: Operation, x: Array, root: int | None) -> Array:
        return collective_data(op, x, root, self.grid)

    def _stages(self, op: Operation, root: int | None) -> list[StageArrays]:
        from plmr.target.route_plan import plan_of

        key = (id(op), root)
        cached = self._plans.get(key)
        if cached is None:
            cached = stage_arrays(plan_of(op, self.grid, root))
            self._plans[key] = cached
        return cached

    def collective_time(self, op: Operation, root: int | None, ready: Ready) -> FloatArray:
        """Runs the plan's stages from when the input is ready; returns the result's ready."""
        dev = self.device
        axis = getattr(op, "axis").data
        elems = self._elems.get(op)
        if elems is None:
            elems = math.prod(static_shape(op.results[0], "value"))
            self._elems[op] = elems
        block_bytes = elems * dev.elem_bytes
        hop = dev.hop_cycles + (dev.relay_cycles if op in self.relayed else 0.0)
        clocks = self.clocks
        # An engines' clock (or none) as the input's: issued when the engines are free
        # (a view: the issue times are their own clock to loop extrapolation).
        behind = (isinstance(ready, float) and ready <= 0.0) or clocks.engine_mark(
            ready
        ) is not None
        issue = clocks.ce_free.view() if behind else np.maximum(ready, clocks.ce_free)
        if isinstance(op, mesh.DiagonalBroadcastOp):
            return self._diagonal_time(op, issue, hop, block_bytes)
        stages = self._stages(op, root)
        issue = self._flow_control(op, stages, issue, axis, hop)
        clocks.mark_behind(issue)  # the engines are busy until `sent` at least
        sent = issue + dev.send_overhead_cycles
        now = np.broadcast_to(sent, self.grid)
        # Positions along the axis are columns (x) or rows (y); no transposes.
        pos_axis = 1 if axis == "x" else 0
        lines = self.grid[1 - pos_axis]

        def along(v: npt.NDArray[Any]) -> npt.NDArray[Any]:
            return v if pos_axis == 1 else v[:, None]

        streamed_any = False
        reduces = False
        resume = 0
        # A stage changes only its receivers' clocks: `now` is copied once (`owned`) and
        # updated at their positions (the others would take max(x, -inf) and x + 0).
        owned = False

        def own(v: npt.NDArray[Any]) -> FloatArray:
            return v if owned else np.array(np.broadcast_to(v, self.grid), dtype=CLOCK)

        for index, st in enumerate(stages):
            if index < resume or st.src.size == 0:
                continue
            # A chain of identical stages (a ring's steps) is one closed-form jump.
            repeat = 1 if self.mode != "timing" or self.exact else chain_run(stages, index)
            msg_bytes = block_bytes * st.fraction
            wavelets = math.ceil(msg_bytes / dev.link_bytes_per_cycle)
            delay = st.hops * hop + 2 * dev.ramp_cycles
            if index:
                delay = delay + dev.step_overhead_cycles
            if not st.streamed:
                delay = delay + wavelets * st.load
            if st.unique_dst:
                assert st.src_of is not None
                assert st.hops_of is not None
                assert st.load_of is not None
                delay_of = st.hops_of * hop + 2 * dev.ramp_cycles
                if index:
                    delay_of = delay_of + dev.step_overhead_cycles
                if not st.streamed:
                    delay_of = delay_of + wavelets * st.load_of
                if repeat > 1:
                    add = self._combine_cost(op, st, elems) if st.combine else 0.0
                    now = chain_power(
                        now, st.src_of, delay_of.astype(CLOCK), add, repeat, pos_axis
                    )
                    owned = False
                    resume = index + repeat
                    self.log_extrapolation(Extrapolated(STAGES, repeat - 1, now, now))
                else:
                    # Every position takes the later of its clock and its sender's plus
                    # the delay, -inf where nothing arrives (max(x, -inf) is x): the
                    # receivers' sums of an update in place, in one gather.
                    d = np.full(st.src_of.size, -np.inf, dtype=CLOCK)
                    d[st.dst] = delay_of[st.dst]
                    arrival = (
                        now[:, st.src_of] if pos_axis == 1 else np.take(now, st.src_of, 0)
                    )
                    arrival += along(d)
                    now, owned = np.maximum(arrival, now, out=arrival), True
            else:
                arrival = np.take(now, st.src, axis=pos_axis)
                arrival += along(delay.astype(CLOCK))
                now, owned = own(now), True
                target = (slice(None), st.dst) if pos_axis == 1 else (st.dst,)
                np.maximum.at(now, target, arrival)  # pyright: ignore[reportArgumentType]
            if st.combine:
                reduces = True
                if repeat == 1:
                    assert st.counts is not None
                    per = self._combine_cost(op, st, elems)
                    got = np.flatnonzero(st.counts)
                    now, owned = own(now), True
                    spent = along((st.counts[got] * per).astype(CLOCK))
                    if pos_axis == 1:
                        now[:, got] += spent
                    else:
                        now[got] += spent
            streamed_any = streamed_any or st.streamed
            n_msgs = st.src.size * lines * repeat
            self.traffic.bytes += msg_bytes * n_msgs
            self.traffic.hop_bytes += msg_bytes * float(st.hops.sum()) * lines * repeat
            self.traffic.messages += n_msgs
        if streamed_any:
            now = now + math.ceil(block_bytes / dev.link_bytes_per_cycle)
            owned = True
        if owned:
            now += dev.recv_overhead_cycles
        else:
            now = now + dev.recv_overhead_cycles
        done = np.asarray(now, dtype=CLOCK)
        # The compute engine issues the send; reductions also keep it busy combining
        # (the engines' clock is another object: loop extrapolation tells clocks apart
        # by identity; neither is ever updated in place).
        if reduces:
            clocks.set_engine(done.view(), done)
        else:
            clocks.set_engine(np.broadcast_to(sent, self.grid))
        return self._recorded(op, issue, done)

    def _recorded(self, op: Operation, issue: FloatArray, done: FloatArray) -> FloatArray:
        """Records a collective from `issue` to `done` (trace, busy time, time by op)."""
        if self.recorder is not None:
            self.recorder.record(op.name, issue, done, self.grid)
        if self.track_busy:
            self.clocks.comm_busy += done - issue
        # Time by op is sampled at PE (0, 0) (a full reduction per op would double the cost).
        self.account(op, float(done[0, 0]) - float(np.broadcast_to(issue, self.grid)[0, 0]))
        return done

    def _diagonal_time(
        self,
        op: mesh.DiagonalBroadcastOp,
        issue: FloatArray,
        hop: float,
        block_bytes: int,
    ) -> FloatArray:
        """
        A diagonal broadcast, line by line as a broadcast from the line's own root (one
        streamed multicast: hops and ramps, then the block's wavelets once).
        """
        dev, clocks = self.device, self.clocks
        clocks.mark_behind(issue)
        sent = np.asarray(
            np.broadcast_to(issue + dev.send_overhead_cycles, self.grid), dtype=CLOCK
        )
        n = self.grid[0]
        index = np.arange(n)
        # hops[l, p]: from line l's root (position l) to position p.
        hops = np.abs(index[None, :] - index[:, None]).astype(CLOCK)
        arrival = sent[index, index][:, None] + hops * hop + 2 * dev.ramp_cycles
        arrival[index, index] = -np.inf  # the root keeps its own block
        # Lines are rows along x (positions are columns); along y, columns.
        along = arrival if op.axis.data == "x" else arrival.T
        now = np.maximum(sent, along)
        now += math.ceil(block_bytes / dev.link_bytes_per_cycle) + dev.recv_overhead_cycles
        clocks.set_engine(np.broadcast_to(sent, self.grid))
        self.traffic.bytes += block_bytes * n * (n - 1)
        self.traffic.hop_bytes += block_bytes * float(hops.sum())
        self.traffic.messages += n * (n - 1)
        return self._recorded(op, issue, now)

    def _combine_cost(self, op: Operation, st: StageArrays, elems: int) -> float:
        """Cycles to combine one received message of a reducing stage."""
        kind = getattr(op, "kind").data
        shape = static_shape(op.results[0], "value")
        return combine_cycles(
            self.device, kind, elems, shape[-1] if shape else 1, st.fraction
        )

    def _flow_control(
        self,
        op: Operation,
        stages: list[StageArrays],
        issue: FloatArray,
        axis: str,
        hop: float,
    ) -> FloatArray:
        """Double buffering (`flow_control`); remembers this instance's issue times."""
        issue = flow_control(
            self.device, self.grid, self._last_issue.get(op), stages, issue, axis, hop
        )
        self._last_issue[op] = issue
        return issue

    # -- point to point ------------------------------------------------------------------

    def send(self, op: mesh.SendOp, value: Array, mask: Array | None, ready: Ready) -> None:
        assert self.table is not None
        dev = self.device
        color = op.color.value.data
        sources = np.ones(self.grid, dtype=bool) if mask is None else np.asarray(mask, bool)
        sources = np.broadcast_to(sources, self.grid)
        delivery = self.table.trace(color, sources)
        block_bytes = math.prod(static_shape(op.input, "input")) * dev.elem_bytes
        wavelets = math.ceil(block_bytes / dev.link_bytes_per_cycle)
        load = int(delivery.link_load.max()) if delivery.link_load.size else 1
        issue = np.maximum(ready, self.clocks.ce_free)
        sent = np.where(sources, issue + dev.send_overhead_cycles, self.clocks.ce_free)
        arrival = (
            sent[delivery.src_y, delivery.src_x]
            + 2 * dev.ramp_cycles
            + delivery.hops * dev.hop_cycles
            + wavelets * max(load, 1)
        )
        targets = set(zip(delivery.dst_y.tolist(), delivery.dst_x.tolist(), strict=True))
        if len(targets) != delivery.dst_y.size:
            raise PlmrError(
                f"color {color}: several messages reach the same PE at once; give each "
                "sender its own color"
            )
        has = np.zeros(self.grid, dtype=bool)
        times = np.zeros(self.grid, dtype=CLOCK)
        has[delivery.dst_y, delivery.dst_x] = True
        times[delivery.dst_y, delivery.dst_x] = arrival
        data: Array | None = None
        if self.mode == "functional":
            v = np.asarray(value)
            data = np.zeros_like(v)
            data[delivery.dst_y, delivery.dst_x] = v[delivery.src_y, delivery.src_x]
        self._pending.setdefault(color, []).append(_Pending(has, data, times))
        spent = sent - self.clocks.ce_free
        self.clocks.set_engine(np.asarray(sent, dtype=CLOCK))
        self.clocks.comm_busy += spent
        self.traffic.bytes += block_bytes * delivery.dst_y.size
        self.traffic.hop_bytes += block_bytes * float(delivery.hops.sum())
        self.traffic.messages += int(delivery.dst_y.size)
        self.account(op, spent)

    def recv(self, op: mesh.RecvOp, mask: Array | None) -> tuple[Array, FloatArray]:
        color = op.color.value.data
        want = np.ones(self.grid, dtype=bool) if mask is None else np.asarray(mask, bool)
        want = np.broadcast_to(want, self.grid)
        queue = self._pending.get(color, [])
        if not queue:
            ys, xs = np.nonzero(want)
            cores = ", ".join(f"({y}, {x})" for y, x in zip(ys[:6], xs[:6], strict=True))
            raise PlmrError(
                f"deadlock: PEs {cores}{' ...' if ys.size > 6 else ''} wait on color "
                f"{color} at `{str(op).strip()}`, but no message on that color is in "
                "flight (a send is missing, comes later, or is routed elsewhere)"
            )
        wave = queue.pop(0)
        missing = want & ~wave.has
        if missing.any():
            ys, xs = np.nonzero(missing)
            cores = ", ".join(f"({y}, {x})" for y, x in zip(ys[:6], xs[:6], strict=True))
            raise PlmrError(
                f"deadlock: PEs {cores}{' ...' if ys.size > 6 else ''} wait on color "
                f"{color}, but the routes deliver nothing to them"
            )
        ready = np.where(want, wave.arrival, 0.0)
        self.clocks.finish = np.maximum(self.clocks.finish, ready)
        self.account(op, 0.0)
        if self.mode == "timing" or wave.data is None:
            return self.placeholder(op.result), ready
        data = np.where(want.reshape(self.grid + (1,) * (wave.data.ndim - 2)), wave.data, 0)
        return data.astype(wave.data.dtype), ready


def _tensor_bytes(t: TensorType[Attribute]) -> int:
    return int(np.prod(t.get_shape())) * np.dtype(tensor_dtype(cast(Attribute, t))).itemsize


def find_program(module: ModuleOp, name: str | None) -> mesh.ProgramOp:
    programs = [op for op in module.ops if isinstance(op, mesh.ProgramOp)]
    names = ", ".join(f"@{p.sym_name.data}" for p in programs) or "none"
    if name is not None:
        for p in programs:
            if p.sym_name.data == name:
                return p
        raise PlmrError(f"no mesh.program @{name} (programs: {names})")
    if len(programs) == 1:
        return programs[0]
    if not programs:
        raise PlmrError("the module has no mesh.program")
    raise PlmrError(f"several mesh.programs ({names}); choose one with --entry")


def run_mesh(
    module: ModuleOp,
    inputs: Sequence[Array],
    *,
    device: Device | str | None = None,
    mode: str = "functional",
    name: str | None = None,
    relay: bool = False,
    recorder: TraceRecorder | None = None,
    exact: bool = False,
    layers: LayerRepeat | None = None,
    state: WaferState | None = None,
) -> tuple[list[Array], Report]:
    """
    Runs a mesh program (on its own device unless `device` is given). In timing mode,
    loops that reach a periodic regime are extrapolated unless `exact` is set
    (`plmr.runtime.steady`); the report says how many iterations were. `layers` runs
    a window of the program once per further layer of a model (timing mode). With
    `state`, the program's named state stays on the wafer (`inputs`: the host inputs).
    """
    program = find_program(module, name)
    if device is None:
        device = program.device.spec.data
    dev = get_device(device) if isinstance(device, str) else device
    runtime = MeshRuntime(
        dev, mode, relay, recorder=recorder, exact=exact, layers=layers, state=state
    )
    return runtime.run_program(program, inputs)


__all__ = [
    "CLOCK",
    "MODES",
    "Clocks",
    "FloatArray",
    "MeshRuntime",
    "Ready",
    "SpmdEvaluator",
    "Traffic",
    "chunk_index",
    "find_program",
    "gather_array",
    "run_mesh",
    "scatter_array",
    "skew_index",
]
