"""
The tuner's learned cost model: gradient-boosted regression trees in numpy.

It predicts a candidate's log cycles relative to its program's default schedule from the
feature vector of `plmr.schedule.features`, and is only used to rank candidates (which to
measure next), so what matters is its rank correlation on trials it has not seen
(`spearman`). Trees are grown greedily on exact splits of the (few hundred) trials with
a minimum leaf size and shrinkage; samples carry weights, so trials of other programs
(transfer) count for less than the program's own. Training is deterministic: the same
data give the same model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from plmr.errors import PlmrError


@dataclass
class _Tree:
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        node = np.zeros(x.shape[0], dtype=np.int64)
        for _ in range(64):
            leaf = self.left[node] < 0
            if leaf.all():
                break
            f = self.feature[node]
            go_left = x[np.arange(x.shape[0]), np.maximum(f, 0)] <= self.threshold[node]
            nxt = np.where(go_left, self.left[node], self.right[node])
            node = np.where(leaf, node, nxt)
        return self.value[node]


def _best_split(
    x: np.ndarray, g: np.ndarray, w: np.ndarray, min_leaf: int
) -> tuple[int, float, float]:
    """(feature, threshold, gain) of the best weighted-SSE split, gain 0 if none."""
    n, d = int(x.shape[0]), int(x.shape[1])
    best = (-1, 0.0, 0.0)
    if n < 2 * min_leaf:
        return best
    total_w, total_g = float(w.sum()), float((w * g).sum())
    base = total_g * total_g / total_w
    for j in range(d):
        order = np.argsort(x[:, j], kind="stable")
        xs = x[order, j]
        cw = np.cumsum(w[order])[:-1]
        cg = np.cumsum((w * g)[order])[:-1]
        idx: np.ndarray = np.arange(1, n)
        ok: np.ndarray = (xs[1:] > xs[:-1]) & (idx >= min_leaf) & (n - idx >= min_leaf)
        if not ok.any():
            continue
        rw = total_w - cw
        gain = cg * cg / np.maximum(cw, 1e-12) + (total_g - cg) ** 2 / np.maximum(rw, 1e-12)
        gain = np.where(ok, gain - base, -np.inf)
        i = int(np.argmax(gain))
        if gain[i] > best[2] + 1e-12:
            best = (j, float((xs[i] + xs[i + 1]) / 2), float(gain[i]))
    return best


def _grow(x: np.ndarray, g: np.ndarray, w: np.ndarray, depth: int, min_leaf: int) -> _Tree:
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[float] = []

    def node(rows: np.ndarray, level: int) -> int:
        i = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        ww = w[rows]
        value.append(float((ww * g[rows]).sum() / max(ww.sum(), 1e-12)))
        if level >= depth:
            return i
        j, t, gain = _best_split(x[rows], g[rows], ww, min_leaf)
        if j < 0 or gain <= 0:
            return i
        mask = x[rows, j] <= t
        feature[i], threshold[i] = j, t
        left[i] = node(rows[mask], level + 1)
        right[i] = node(rows[~mask], level + 1)
        return i

    node(np.arange(int(x.shape[0])), 0)
    return _Tree(
        np.array(feature),
        np.array(threshold),
        np.array(left),
        np.array(right),
        np.array(value),
    )


@dataclass
class CostModel:
    """Boosted trees: `fit(x, y, w)`, then `predict(x)` (lower is faster)."""

    rounds: int = 60
    depth: int = 3
    rate: float = 0.15
    min_leaf: int = 2
    trees: list[_Tree] = field(default_factory=lambda: [])
    base: float = 0.0
    samples: int = 0

    def fit(
        self, x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
    ) -> CostModel:
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.ndim != 2 or y.shape != (x.shape[0],):
            raise PlmrError(
                f"cost model: need x [n, d] and y [n], got {x.shape} and {y.shape}"
            )
        w = np.ones_like(y) if weights is None else np.asarray(weights, np.float64)
        self.trees = []
        self.samples = int(x.shape[0])
        if self.samples == 0:
            self.base = 0.0
            return self
        self.base = float((w * y).sum() / w.sum())
        pred = np.full_like(y, self.base)
        for _ in range(self.rounds):
            tree = _grow(x, y - pred, w, self.depth, self.min_leaf)
            if len(tree.feature) == 1:
                break
            pred = pred + self.rate * tree.predict(x)
            self.trees.append(tree)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = np.full(x.shape[0], self.base)
        for tree in self.trees:
            out += self.rate * tree.predict(x)
        return out

    @property
    def trained(self) -> bool:
        return self.samples >= 4 and bool(self.trees)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ties get their mean rank); nan below 3 points."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size < 3:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    sa, sb = ra.std(), rb.std()
    if sa == 0 or sb == 0:
        return float("nan")
    return float(((ra - ra.mean()) * (rb - rb.mean())).mean() / (sa * sb))


def _ranks(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="stable")
    ranks = np.empty(v.size)
    ranks[order] = np.arange(v.size, dtype=np.float64)
    for value in np.unique(v):
        tie = v == value
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


__all__ = ["CostModel", "spearman"]
