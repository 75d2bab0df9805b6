"""
Typed tables of per-op functions: what an op means at a level (its reference semantics,
its lowering, its vectorised implementation) registered next to the function, typed by
the op's own class.

```python
REFERENCE = OpTable[[list[Array]], list[Array]]("reference semantics")

@REFERENCE.impl(graph.GeluOp)
def _run_gelu(op: graph.GeluOp, args: list[Array]) -> list[Array]:
    return [gelu(args[0], op.tanh is not None)]
```

The decorator checks (with pyright) that the function takes the registered class, so a
function never has to recover the type of its op; `lookup` dispatches on the exact class
of an op, the only place where the table relies on the registration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Concatenate, Generic, ParamSpec, TypeVar, cast

from xdsl.ir import Operation

P = ParamSpec("P")
R = TypeVar("R")
OpT = TypeVar("OpT", bound=Operation)


class OpTable(Generic[P, R]):
    """
    Functions `(op, *P) -> R` keyed by op class; each is registered for the classes it
    accepts. `what` names the table in errors.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._impls: dict[type[Operation], Callable[Concatenate[Operation, P], R]] = {}

    def add(self, cls: type[OpT], fn: Callable[Concatenate[OpT, P], R]) -> None:
        """Registers `fn` for ops of exactly the class `cls`."""
        if cls in self._impls:
            raise ValueError(f"{self.what}: '{cls.__name__}' is registered twice")
        # Dispatch is on `type(op) is cls`, so `fn` only ever receives a `cls`.
        self._impls[cls] = cast(Callable[Concatenate[Operation, P], R], fn)

    def impl(
        self, *classes: type[OpT]
    ) -> Callable[[Callable[Concatenate[OpT, P], R]], Callable[Concatenate[OpT, P], R]]:
        """Decorator: registers the function for each of `classes`."""

        def register(
            fn: Callable[Concatenate[OpT, P], R],
        ) -> Callable[Concatenate[OpT, P], R]:
            for cls in classes:
                self.add(cls, fn)
            return fn

        return register

    def update(self, other: OpTable[P, R]) -> None:
        """Registers every entry of `other` here too."""
        for cls, fn in other.as_dict().items():
            self.add(cls, fn)

    def lookup(self, op: Operation) -> Callable[Concatenate[Operation, P], R] | None:
        """The function registered for the class of `op`, or None."""
        return self._impls.get(type(op))

    def as_dict(self) -> dict[type[Operation], Callable[Concatenate[Operation, P], R]]:
        """A copy of the table as a dict from op class to function."""
        return dict(self._impls)

    def __contains__(self, cls: type[Operation]) -> bool:
        return cls in self._impls

    def __iter__(self) -> Iterator[type[Operation]]:
        return iter(self._impls)

    def __len__(self) -> int:
        return len(self._impls)
