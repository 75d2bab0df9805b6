"""One local Ray instance for the whole test session (1 CPU), when Ray is installed."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("needs ray (pip install -e '.[ray]')")
    import ray  # pyright: ignore[reportMissingImports]

    ray_any: Any = ray
    ray_any.init(
        num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    yield ray_any
    ray_any.shutdown()
