"""Same-level rewrites of plmr programs."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Returns every plmr pass (rewrites and lowerings) by name, imported lazily."""
    return {}
