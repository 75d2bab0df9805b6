"""
Where the tuner's candidates run: in this process, in worker processes, or as Ray tasks.

An executor evaluates a batch of candidates and yields their measurements in submission
order, so a tuning run with a fixed seed gives the same trials whatever runs them (and
however many workers it has). The performance database is written by the driver only:
workers return measurements, they never open the file.

Ray is an optional extra (`pip install -e '.[ray]'`): `RayExecutor()` starts a local
Ray instance (or joins the one already started in this process), `RayExecutor(address)`
a cluster's (`ray://host:10001`, or `auto`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol

from plmr.errors import PlmrError

EXECUTORS = ("process", "ray")

Task = tuple[Any, ...]


class Executor(Protocol):
    """Runs `fn(*args)` for each args tuple; yields the results in order."""

    def run(self, fn: Callable[..., Any], tasks: Sequence[Task]) -> Iterator[Any]: ...

    def close(self) -> None: ...


class ProcessExecutor:
    """`workers` processes (1: in this process, no pool)."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise PlmrError(f"--workers must be >= 1, got {workers}")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: Callable[..., Any], tasks: Sequence[Task]) -> Iterator[Any]:
        if self.workers == 1 or len(tasks) <= 1:
            for args in tasks:
                yield fn(*args)
            return
        if self._pool is None:
            # Spawned, not forked: a child forked after egglog (the eqsat engine) was
            # imported deadlocks in it.
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
            )
        futures = [self._pool.submit(fn, *args) for args in tasks]
        for f in futures:
            yield f.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class RayExecutor:
    """Ray tasks: a local instance with `workers` CPUs, or the cluster at `address`."""

    def __init__(self, workers: int = 1, address: str | None = None) -> None:
        try:
            import ray  # pyright: ignore[reportMissingImports]
        except ImportError as e:
            raise PlmrError(
                "the ray executor needs Ray: .venv/bin/pip install -e '.[ray]'"
            ) from e
        if workers < 1:
            raise PlmrError(f"--workers must be >= 1, got {workers}")
        self._ray: Any = ray
        self._started = False
        self._remote: dict[Callable[..., Any], Any] = {}
        if not self._ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address is None:
                kwargs["num_cpus"] = workers
            else:
                kwargs["address"] = address
            try:
                self._ray.init(**kwargs)
            except Exception as e:  # connection refused, bad address, ...
                where = address or "a local instance"
                raise PlmrError(f"cannot start Ray on {where}: {e}") from e
            self._started = True

    def run(self, fn: Callable[..., Any], tasks: Sequence[Task]) -> Iterator[Any]:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._ray.remote(num_cpus=1)(fn)
            self._remote[fn] = remote
        refs = [remote.remote(*args) for args in tasks]
        for ref in refs:
            yield self._ray.get(ref)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


def make_executor(kind: str, workers: int = 1, address: str | None = None) -> Executor:
    """`process` or `ray`; `address` only with `ray`."""
    if kind == "process":
        if address is not None:
            raise PlmrError("--address needs --executor ray")
        return ProcessExecutor(workers)
    if kind == "ray":
        return RayExecutor(workers, address)
    raise PlmrError(f"unknown executor '{kind}' ({', '.join(EXECUTORS)})")


__all__ = ["EXECUTORS", "Executor", "ProcessExecutor", "RayExecutor", "make_executor"]
