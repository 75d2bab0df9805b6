"""
Static routing: per-router route tables and the tracing of messages through them.

A router has five ports (the PE's ramp and the four neighbours). For each color it holds
one configuration "arriving from port p, forward to ports {q, ...}": several output ports
multicast, `ramp` delivers to the PE. A router can hold rules for at most `device.colors` colors
(`reserved_colors` of which the host I/O framework keeps), which is the R in PLMR.

`RouteTable.trace` follows every message injected on a color from a set of PEs through
the rules, all sources at once (numpy over the frontier, one step per hop), and returns
who receives what after how many hops, plus the load on every link (for contention).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from plmr.dialects.mesh import Port
from plmr.errors import PlmrError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

PORTS: tuple[Port, ...] = (Port.RAMP, Port.NORTH, Port.SOUTH, Port.EAST, Port.WEST)
PORT_INDEX: dict[Port, int] = {p: i for i, p in enumerate(PORTS)}
RAMP, NORTH, SOUTH, EAST, WEST = range(5)
DELTA: dict[int, tuple[int, int]] = {
    NORTH: (-1, 0),
    SOUTH: (1, 0),
    EAST: (0, 1),
    WEST: (0, -1),
}
OPPOSITE: dict[int, int] = {NORTH: SOUTH, SOUTH: NORTH, EAST: WEST, WEST: EAST}
LINK_DIRS: tuple[int, ...] = (NORTH, SOUTH, EAST, WEST)
"""Directed links leave a router towards these ports (index 0..3 in link arrays)."""


@dataclass(frozen=True)
class Rule:
    """Routers `rows` × `cols` forward `color` from `rx` to the ports in `tx`."""

    color: int
    rows: tuple[int, int, int]
    cols: tuple[int, int, int]
    rx: Port
    tx: tuple[Port, ...]

    def render(self) -> str:
        tx = ", ".join(p.value for p in self.tx)
        return (
            f"color {self.color} rows {list(self.rows)} cols {list(self.cols)} "
            f"from {self.rx.value} to [{tx}]"
        )


@dataclass
class Delivery:
    """The result of tracing one color from a set of sources."""

    src_y: IntArray
    src_x: IntArray
    dst_y: IntArray
    dst_x: IntArray
    hops: IntArray
    link_load: IntArray
    """(4, H, W): messages leaving each router towards N, S, E, W."""


@dataclass
class RouteTable:
    """The route rules of every router of a `rows × cols` grid."""

    rows: int
    cols: int
    tx: dict[int, npt.NDArray[np.uint8]] = field(default_factory=dict[int, Any])
    """color -> (5 rx ports, H, W) bit masks of output ports."""
    rules: list[Rule] = field(default_factory=list[Rule])
    _cache: dict[tuple[int, bytes], Delivery] = field(default_factory=dict[Any, Any])
    _known: set[Rule] = field(default_factory=set[Rule])
    """The members of `rules` (a membership test without a scan)."""

    def add(self, rule: Rule) -> None:
        """Adds a rule; a router given two different outputs for one (color, port) is an error."""
        self.mark(rule)
        if rule not in self._known:
            self._known.add(rule)
            self.rules.append(rule)

    def mark(self, rule: Rule) -> None:
        """Sets a rule's router entries without recording the rule itself."""
        r0, r1, rs = rule.rows
        c0, c1, cs = rule.cols
        if r1 > self.rows or c1 > self.cols or r0 < 0 or c0 < 0:
            raise PlmrError(
                f"route `{rule.render()}` covers routers outside the {self.rows}x{self.cols} grid"
            )
        table = self.tx.get(rule.color)
        if table is None:
            table = np.zeros((5, self.rows, self.cols), dtype=np.uint8)
            self.tx[rule.color] = table
        bits = 0
        for p in rule.tx:
            bits |= 1 << PORT_INDEX[p]
        rx = PORT_INDEX[rule.rx]
        region = table[rx, r0:r1:rs, c0:c1:cs]
        others = [i for i in range(5) if i != rx]
        # A router holds one configuration per color: one input port, its output ports.
        clash = ((region != 0) & (region != bits)) | (
            table[others, r0:r1:rs, c0:c1:cs] != 0
        ).any(axis=0)
        if clash.any():
            ys, xs = np.nonzero(clash)
            y, x = r0 + int(ys[0]) * rs, c0 + int(xs[0]) * cs
            raise PlmrError(
                f"route conflict at router ({y}, {x}): color {rule.color} is already "
                f"configured differently there (a router holds one route per color); "
                f"`{rule.render()}` needs another color"
            )
        region[...] = bits
        self._cache.clear()

    def set_lines(
        self, color: int, axis: str, positions: IntArray, rx: IntArray, bits: IntArray
    ) -> None:
        """
        Configures whole lines of routers without a conflict check (the caller checked):
        for each j, every router at position `positions[j]` along `axis` (a column for
        `x`, a row for `y`) forwards `color` from port `rx[j]` to the ports in `bits[j]`.
        """
        table = self.tx.get(color)
        if table is None:
            table = np.zeros((5, self.rows, self.cols), dtype=np.uint8)
            self.tx[color] = table
        values = bits.astype(np.uint8)[:, None]
        if axis == "x":
            table[rx, :, positions] = values
        else:
            table[rx, positions, :] = values
        self._cache.clear()

    def extend(self, rules: Iterable[Rule]) -> None:
        for rule in rules:
            self.add(rule)

    def colors_per_router(self) -> IntArray:
        """(H, W): how many colors each router holds a rule for."""
        count = np.zeros((self.rows, self.cols), dtype=np.int64)
        for table in self.tx.values():
            count += (table != 0).any(axis=0)
        return count

    def trace(self, color: int, sources: BoolArray) -> Delivery:
        """Follows messages injected at `sources` (H×W mask) on `color` to their receivers."""
        key = (color, np.packbits(sources).tobytes())
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        table = self.tx.get(color)
        sy, sx = (a.astype(np.int64) for a in np.nonzero(sources))
        if table is None:
            if sy.size:
                raise PlmrError(
                    f"PE ({sy[0]}, {sx[0]}) sends on color {color}, but no router has a "
                    "route for that color"
                )
            table = np.zeros((5, self.rows, self.cols), dtype=np.uint8)
        delivery = self._trace(color, table, sy, sx)
        self._cache[key] = delivery
        return delivery

    def _trace(
        self, color: int, table: npt.NDArray[np.uint8], sy: IntArray, sx: IntArray
    ) -> Delivery:
        src_y, src_x = sy.copy(), sx.copy()
        y, x = sy.copy(), sx.copy()
        rx = np.full(sy.shape, RAMP, dtype=np.int64)
        hops = np.zeros(sy.shape, dtype=np.int64)
        out: list[tuple[IntArray, ...]] = []
        load = np.zeros((4, self.rows, self.cols), dtype=np.int64)
        limit = 2 * (self.rows + self.cols) + 8
        step = 0
        while y.size:
            step += 1
            if step > limit * 4:
                raise PlmrError(
                    f"routing loop on color {color}: a message from PE ({src_y[0]}, "
                    f"{src_x[0]}) never reaches a ramp"
                )
            bits = table[rx, y, x]
            stuck = bits == 0
            if stuck.any():
                i = int(np.argmax(stuck))
                raise PlmrError(
                    f"no route for color {color} at router ({y[i]}, {x[i]}) from "
                    f"{PORTS[int(rx[i])].value} (message from PE ({src_y[i]}, {src_x[i]})); "
                    "add a mesh.route rule or run mesh-route"
                )
            deliver = (bits & 1) != 0
            if deliver.any():
                out.append(
                    (src_y[deliver], src_x[deliver], y[deliver], x[deliver], hops[deliver])
                )
            parts: list[tuple[IntArray, ...]] = []
            for li, d in enumerate(LINK_DIRS):
                go = (bits & (1 << d)) != 0
                if not go.any():
                    continue
                dy, dx = DELTA[d]
                ny, nx = y[go] + dy, x[go] + dx
                outside = (ny < 0) | (ny >= self.rows) | (nx < 0) | (nx >= self.cols)
                if outside.any():
                    i = int(np.argmax(outside))
                    raise PlmrError(
                        f"route for color {color} leaves the grid at router "
                        f"({y[go][i]}, {x[go][i]}) towards {PORTS[d].value}"
                    )
                np.add.at(load[li], (y[go], x[go]), 1)
                parts.append(
                    (
                        src_y[go],
                        src_x[go],
                        ny,
                        nx,
                        np.full(ny.shape, OPPOSITE[d], dtype=np.int64),
                        hops[go] + 1,
                    )
                )
            if not parts:
                break
            src_y, src_x, y, x, rx, hops = (
                np.concatenate([p[k] for p in parts]) for k in range(6)
            )
        if out:
            cols = [np.concatenate([o[k] for o in out]) for k in range(5)]
        else:
            cols = [np.zeros(0, dtype=np.int64) for _ in range(5)]
        return Delivery(cols[0], cols[1], cols[2], cols[3], cols[4], load)


def compress_positions(positions: Sequence[int]) -> list[tuple[int, int, int]]:
    """Covers a sorted set of positions with few `(start, stop, step)` progressions."""
    remaining = sorted(set(positions))
    ranges: list[tuple[int, int, int]] = []
    while remaining:
        start = remaining[0]
        if len(remaining) == 1:
            ranges.append((start, start + 1, 1))
            break
        step = remaining[1] - start
        members = [start]
        pos = set(remaining)
        nxt = start + step
        while nxt in pos:
            members.append(nxt)
            nxt += step
        ranges.append((start, members[-1] + 1, step))
        taken = set(members)
        remaining = [p for p in remaining if p not in taken]
    return ranges
