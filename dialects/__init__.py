"""plmr's dialects, one per level: `graph`, `loop`, `tile`, `mesh`."""

from collections.abc import Callable

from xdsl.ir import Dialect

from plmr.dialects import float_text

# Floats print and parse bit for bit (`±inf`, NaN, `-0.0`) wherever plmr's dialects are
# loaded: in plmr's tools and in `xdsl-opt` with plmr's universe.
float_text.install()


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Returns every plmr dialect by name, imported lazily."""

    def get_graph() -> Dialect:
        from plmr.dialects.graph import Graph

        return Graph

    def get_loop() -> Dialect:
        from plmr.dialects.loop import Loop

        return Loop

    def get_tile() -> Dialect:
        from plmr.dialects.tile import Tile

        return Tile

    def get_mesh() -> Dialect:
        from plmr.dialects.mesh import Mesh

        return Mesh

    return {"graph": get_graph, "loop": get_loop, "tile": get_tile, "mesh": get_mesh}
