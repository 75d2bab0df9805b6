"""The learned cost model: boosted trees in numpy, and the rank correlation."""

from __future__ import annotations

import numpy as np
import pytest

from plmr.errors import PlmrError
from plmr.schedule.cost_model import CostModel, spearman


def _objective(x: np.ndarray) -> np.ndarray:
    # Interactions and a threshold, as cycles have (a block that stops fitting).
    return np.log1p(x[:, 0] * x[:, 1]) + 2.0 * (x[:, 2] > 0.6) - 0.5 * x[:, 3] ** 2


def test_model_improves_with_data():
    rng = np.random.default_rng(0)
    test = rng.uniform(0, 1, (400, 8))
    rhos: list[float] = []
    for n in (6, 24, 96, 384):
        x = rng.uniform(0, 1, (n, 8))
        model = CostModel().fit(x, _objective(x))
        rhos.append(spearman(model.predict(test), _objective(test)))
    assert rhos[-1] > 0.9
    assert rhos[-1] > rhos[0] + 0.2
    assert rhos[2] > rhos[0]


def test_training_is_deterministic_and_weighted():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (50, 3))
    y = x[:, 0]
    a = CostModel().fit(x, y).predict(x)
    b = CostModel().fit(x, y).predict(x)
    assert np.array_equal(a, b)
    # Samples of weight ~0 do not pull the prediction: a constant offset on them is ignored.
    w = np.where(np.arange(50) < 25, 1.0, 1e-9)
    shifted = np.where(np.arange(50) < 25, y, y + 100.0)
    m = CostModel().fit(x, shifted, w)
    assert float(np.max(np.abs(m.predict(x[:25]) - y[:25]))) < 0.5


def test_spearman():
    assert spearman(
        np.array([1, 2, 3, 4.0]), np.array([10, 20, 30, 40.0])
    ) == pytest.approx(1)
    assert spearman(np.array([1, 2, 3, 4.0]), np.array([4, 3, 2, 1.0])) == pytest.approx(-1)
    assert np.isnan(spearman(np.array([1.0, 2.0]), np.array([1.0, 2.0])))


def test_bad_shapes():
    with pytest.raises(PlmrError, match="need x"):
        CostModel().fit(np.zeros((3, 2)), np.zeros(4))
