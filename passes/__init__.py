"""Same-level rewrites of plmr programs."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Returns every plmr pass (rewrites and lowerings) by name, imported lazily."""

    def convert_graph_to_loop() -> type[ModulePass]:
        from plmr.lowering.graph_to_loop import ConvertGraphToLoopPass

        return ConvertGraphToLoopPass

    def neptune_fuse() -> type[ModulePass]:
        from plmr.passes.neptune.fuse import NeptuneFusePass

        return NeptuneFusePass

    def convert_loop_to_tile() -> type[ModulePass]:
        from plmr.lowering.loop_to_tile import ConvertLoopToTilePass

        return ConvertLoopToTilePass

    def convert_loop_to_scf() -> type[ModulePass]:
        from plmr.lowering.loop_to_scf import ConvertLoopToScfPass

        return ConvertLoopToScfPass

    def mesh_route() -> type[ModulePass]:
        from plmr.passes.mesh_route import MeshRoutePass

        return MeshRoutePass

    def mesh_check_limits() -> type[ModulePass]:
        from plmr.passes.mesh_check_limits import MeshCheckLimitsPass

        return MeshCheckLimitsPass

    def mesh_verify_plmr_deprecated() -> type[ModulePass]:
        from plmr.passes.mesh_check_limits import MeshVerifyPlmrPass  # deprecated-alias

        return MeshVerifyPlmrPass  # deprecated-alias

    def taso_substitute() -> type[ModulePass]:
        from plmr.passes.taso.substitute import TasoSubstitutePass

        return TasoSubstitutePass

    def graph_canonicalize() -> type[ModulePass]:
        from plmr.passes.graph_canonicalize import GraphCanonicalizePass

        return GraphCanonicalizePass

    def graph_defer_norm_scale() -> type[ModulePass]:
        from plmr.passes.norm_defer import GraphDeferNormScalePass

        return GraphDeferNormScalePass

    def graph_merge_matmuls() -> type[ModulePass]:
        from plmr.passes.merge_matmuls import GraphMergeMatmulsPass

        return GraphMergeMatmulsPass

    def graph_fold_rotate_half() -> type[ModulePass]:
        from plmr.passes.rotate_fold import GraphFoldRotateHalfPass

        return GraphFoldRotateHalfPass

    def graph_fold_repeat_kv() -> type[ModulePass]:
        from plmr.passes.repeat_kv_fold import GraphFoldRepeatKvPass

        return GraphFoldRepeatKvPass

    def graph_fold_heads() -> type[ModulePass]:
        from plmr.passes.heads_fold import GraphFoldHeadsPass

        return GraphFoldHeadsPass

    def graph_kv_state() -> type[ModulePass]:
        from plmr.passes.kv_state import GraphKvStatePass

        return GraphKvStatePass

    def graph_outline_layers() -> type[ModulePass]:
        from plmr.passes.outline_layers import GraphOutlineLayersPass

        return GraphOutlineLayersPass

    def transpose_elim() -> type[ModulePass]:
        from plmr.passes.transpose_elim import TransposeElimPass

        return TransposeElimPass

    def convert_tile_to_mesh() -> type[ModulePass]:
        from plmr.lowering.tile_to_mesh import ConvertTileToMeshPass

        return ConvertTileToMeshPass

    def loop_simplify_indices() -> type[ModulePass]:
        from plmr.passes.loop_indices import LoopSimplifyIndicesPass

        return LoopSimplifyIndicesPass

    def loop_materialize_indices() -> type[ModulePass]:
        from plmr.passes.loop_index_values import LoopMaterializeIndicesPass

        return LoopMaterializeIndicesPass

    def loop_split_heads() -> type[ModulePass]:
        from plmr.passes.neptune.split_heads import LoopSplitHeadsPass

        return LoopSplitHeadsPass

    def mesh_pack_allreduces() -> type[ModulePass]:
        from plmr.passes.mesh_pack import MeshPackAllreducesPass

        return MeshPackAllreducesPass

    def mesh_shape_trees() -> type[ModulePass]:
        from plmr.passes.mesh_trees import MeshShapeTreesPass

        return MeshShapeTreesPass

    def mesh_fuse_softmax() -> type[ModulePass]:
        from plmr.passes.mesh_softmax import MeshFuseSoftmaxPass

        return MeshFuseSoftmaxPass

    def plmr_compile() -> type[ModulePass]:
        from plmr.passes.pipeline import PlmrCompilePass

        return PlmrCompilePass

    return {
        "graph-canonicalize": graph_canonicalize,
        "taso-substitute": taso_substitute,
        "transpose-elim": transpose_elim,
        "graph-defer-norm-scale": graph_defer_norm_scale,
        "graph-merge-matmuls": graph_merge_matmuls,
        "graph-fold-rotate-half": graph_fold_rotate_half,
        "graph-fold-repeat-kv": graph_fold_repeat_kv,
        "graph-fold-heads": graph_fold_heads,
        "graph-kv-state": graph_kv_state,
        "graph-outline-layers": graph_outline_layers,
        "mesh-route": mesh_route,
        "mesh-pack-allreduces": mesh_pack_allreduces,
        "mesh-fuse-softmax": mesh_fuse_softmax,
        "mesh-shape-trees": mesh_shape_trees,
        "mesh-check-limits": mesh_check_limits,
        "mesh-verify-plmr": mesh_verify_plmr_deprecated,  # deprecated-alias
        "convert-graph-to-loop": convert_graph_to_loop,
        "neptune-fuse": neptune_fuse,
        "loop-simplify-indices": loop_simplify_indices,
        "loop-materialize-indices": loop_materialize_indices,
        "loop-split-heads": loop_split_heads,
        "convert-loop-to-tile": convert_loop_to_tile,
        "convert-loop-to-scf": convert_loop_to_scf,
        "convert-tile-to-mesh": convert_tile_to_mesh,
        "plmr-compile": plmr_compile,
    }
