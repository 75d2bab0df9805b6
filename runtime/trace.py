"""
Chrome-trace timelines and per-PE heatmaps of a mesh program run.

The trace (`--trace FILE.json`, viewable in chrome://tracing or Perfetto) has one track
per selected PE — by default the first PE of each of the first rows — with one event per
op. The heatmap (`--heatmap FILE.png`, needs matplotlib: `pip install plmr[plot]`) shows
a per-PE figure (finishing time, or compute share) over the grid.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from plmr.errors import PlmrError


@dataclass
class TraceRecorder:
    """Collects (op, start, end) of selected PEs while a program runs."""

    pes: list[tuple[int, int]]
    clock_hz: float
    max_events: int = 200_000
    events: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    dropped: int = 0

    def record(self, name: str, start: Any, end: Any, grid: tuple[int, int]) -> None:
        s = np.broadcast_to(np.asarray(start, dtype=np.float64), grid)
        e = np.broadcast_to(np.asarray(end, dtype=np.float64), grid)
        for tid, (y, x) in enumerate(self.pes):
            if len(self.events) >= self.max_events:
                self.dropped += 1
                continue
            t0, t1 = float(s[y, x]), float(e[y, x])
            self.events.append(
                {
                    "name": name,
                    "ph": "X",
                    "pid": 0,
                    "tid": tid,
                    "ts": t0 * 1e6 / self.clock_hz,
                    "dur": max(t1 - t0, 0.0) * 1e6 / self.clock_hz,
                    "args": {"start_cycle": t0, "end_cycle": t1},
                }
            )

    def record_extrapolated(
        self, what: str, iterations: int, start: Any, end: Any, grid: tuple[int, int]
    ) -> None:
        """One slice for `iterations` iterations of `what` extrapolated, not stepped."""
        before = len(self.events)
        self.record(f"×{iterations} extrapolated", start, end, grid)
        for event in self.events[before:]:
            event["cat"] = "extrapolated"
            event["args"]["extrapolated"] = what
            event["args"]["iterations"] = iterations

    def write(self, path: Path) -> None:
        meta = [
            {
                "name": "thread_name",
                "ph": "M",
                "pid": 0,
                "tid": tid,
                "args": {"name": f"PE ({y}, {x})"},
            }
            for tid, (y, x) in enumerate(self.pes)
        ]
        doc: dict[str, Any] = {"traceEvents": meta + self.events, "displayTimeUnit": "ns"}
        if self.dropped:
            doc["otherData"] = {"dropped_events": self.dropped}
        path.write_text(json.dumps(doc))


def default_pes(grid: tuple[int, int], limit: int = 16) -> list[tuple[int, int]]:
    """The first PE of each of the first `limit` rows (one track per core row)."""
    return [(y, 0) for y in range(min(grid[0], limit))]


def parse_pes(text: str, grid: tuple[int, int]) -> list[tuple[int, int]]:
    """`"0,0;3,4"` -> [(0, 0), (3, 4)], checked against the grid."""
    pes: list[tuple[int, int]] = []
    for item in text.split(";"):
        parts = item.strip().split(",")
        if len(parts) != 2:
            raise PlmrError(f"bad PE '{item}' in --trace-pes: expected y,x (e.g. 0,0;3,4)")
        try:
            y, x = int(parts[0]), int(parts[1])
        except ValueError as e:
            raise PlmrError(f"bad PE '{item}' in --trace-pes: {e}") from e
        if not (0 <= y < grid[0] and 0 <= x < grid[1]):
            raise PlmrError(f"PE ({y}, {x}) is outside the {grid[0]}x{grid[1]} grid")
        pes.append((y, x))
    return pes


def write_heatmap(values: npt.NDArray[Any], path: Path, title: str, label: str) -> None:
    """A per-PE heatmap PNG (matplotlib, an optional extra)."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ImportError as e:
        raise PlmrError(
            "--heatmap needs matplotlib: pip install 'plmr[plot]' (or pip install matplotlib)"
        ) from e
    fig, ax = plt.subplots(figsize=(6, 5))
    image = ax.imshow(values, cmap="viridis", interpolation="nearest")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("x (column)")
    ax.set_ylabel("y (row)")
    fig.colorbar(image, ax=ax, label=label)
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
