"""
The `graph` dialect: plmr's tensor-graph level (the TASO level).

One op per ONNX-like operator, on builtin ranked `tensor` types with static shapes and ONNX
semantics (numpy broadcasting for elementwise ops, NCHW convolution and pooling). Every op
infers its result types from its operands and properties; the verifier checks that the
declared result types equal the inferred ones, so a malformed graph is rejected with a
message naming the offending dimension. The numpy reference semantics of every op lives in
`plmr.runtime.reference`; it is the oracle all later levels are checked against.

The ops live in one module per kind, all part of this one `Graph` dialect (import them from
here):

- `graph_base`: `GraphOp` and the bases of the elementwise ops;
- `graph_elementwise`: arithmetic, activations, math of one operand, comparison, logic,
  selection and casts;
- `graph_movement`: transpose, reshape, concat, split, slice, expand, pad, gather and
  gather_elements;
- `graph_contractions`: matmul and conv2d;
- `graph_reductions`: reduce, softmax, layer and RMS norms, pooling;
- `graph_constants`: dense tensor literals; `graph_weights`: tensors in a weights file;
- `graph_shapes`: the shape inference they share.
"""

from __future__ import annotations

from xdsl.ir import Dialect
from xdsl.traits import Commutative, ConstantLike, Pure

from plmr.dialects.graph_base import (
    BinaryElementwiseOp,
    Domain,
    GraphOp,
    UnaryElementwiseOp,
    UnaryMeaning,
)
from plmr.dialects.graph_constants import (
    ConstantOp,
)
from plmr.dialects.graph_contractions import (
    Conv2dOp,
    MatmulOp,
)
from plmr.dialects.graph_elementwise import (
    AbsOp,
    AddOp,
    AndOp,
    CastOp,
    CeilOp,
    CmpOp,
    CmpPredicate,
    CmpPredicateAttr,
    CoshOp,
    CosOp,
    DivOp,
    ErfOp,
    ExpOp,
    FloorOp,
    GeluOp,
    LogicalBinaryOp,
    LogOp,
    MaximumOp,
    MinimumOp,
    MulOp,
    NegOp,
    NotOp,
    OrOp,
    PowOp,
    ReciprocalOp,
    ReluOp,
    ScaleOp,
    SigmoidOp,
    SiluOp,
    SinhOp,
    SinOp,
    SqrtOp,
    SubOp,
    TanhOp,
    WhereOp,
    XorOp,
)
from plmr.dialects.graph_movement import (
    ConcatOp,
    ExpandOp,
    GatherElementsOp,
    GatherOp,
    PadMode,
    PadModeAttr,
    PadOp,
    ReshapeOp,
    SliceOp,
    SplitOp,
    TransposeOp,
)
from plmr.dialects.graph_reductions import (
    LayerNormOp,
    PoolKind,
    PoolKindAttr,
    PoolOp,
    ReduceKind,
    ReduceKindAttr,
    ReduceOp,
    RmsNormOp,
    SoftmaxOp,
)
from plmr.dialects.graph_shapes import (
    Shape,
    broadcast_shapes,
    check_same_element_type,
    concat_shape,
    conv2d_shape,
    element_type,
    expand_shape,
    fmt_shape,
    gather_elements_shape,
    gather_shape,
    is_bool_type,
    is_float_type,
    is_integer_type,
    matmul_shape,
    normalize_axes,
    normalize_axis,
    pad_shape,
    pool_shape,
    reduce_shape,
    slice_shape,
    split_shapes,
    static_shape,
    tensor_type,
    transpose_shape,
    where_shape,
)
from plmr.dialects.graph_weights import (
    WeightOp,
)

Graph = Dialect(
    "graph",
    [
        MatmulOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        ScaleOp,
        ReluOp,
        GeluOp,
        SiluOp,
        SigmoidOp,
        TanhOp,
        ExpOp,
        ErfOp,
        SqrtOp,
        NegOp,
        TransposeOp,
        ReshapeOp,
        ReduceOp,
        SoftmaxOp,
        LayerNormOp,
        RmsNormOp,
        ConcatOp,
        SplitOp,
        Conv2dOp,
        PoolOp,
        ConstantOp,
        GatherOp,
        WhereOp,
        CmpOp,
        NotOp,
        AndOp,
        OrOp,
        XorOp,
        CastOp,
        AbsOp,
        LogOp,
        CosOp,
        SinOp,
        CoshOp,
        SinhOp,
        FloorOp,
        CeilOp,
        ReciprocalOp,
        PowOp,
        MaximumOp,
        MinimumOp,
        SliceOp,
        ExpandOp,
        PadOp,
        GatherElementsOp,
        WeightOp,
    ],
    [ReduceKindAttr, PoolKindAttr, CmpPredicateAttr, PadModeAttr],
)


def unary_meanings() -> dict[type[UnaryElementwiseOp], UnaryMeaning]:
    """The ops of `Graph` that carry their meaning (`UnaryElementwiseOp.MEANING`)."""
    return {
        cls: cls.MEANING
        for cls in Graph.operations
        if issubclass(cls, UnaryElementwiseOp) and cls.MEANING is not None
    }


__all__ = [
    "AbsOp",
    "AddOp",
    "AndOp",
    "BinaryElementwiseOp",
    "CastOp",
    "CeilOp",
    "CmpOp",
    "CmpPredicate",
    "CmpPredicateAttr",
    "Commutative",
    "ConcatOp",
    "ConstantLike",
    "ConstantOp",
    "Conv2dOp",
    "CosOp",
    "CoshOp",
    "DivOp",
    "Domain",
    "ErfOp",
    "ExpOp",
    "ExpandOp",
    "FloorOp",
    "GatherElementsOp",
    "GatherOp",
    "GeluOp",
    "Graph",
    "GraphOp",
    "LayerNormOp",
    "LogOp",
    "LogicalBinaryOp",
    "MatmulOp",
    "MaximumOp",
    "MinimumOp",
    "MulOp",
    "NegOp",
    "NotOp",
    "OrOp",
    "PadMode",
    "PadModeAttr",
    "PadOp",
    "PoolKind",
    "PoolKindAttr",
    "PoolOp",
    "PowOp",
    "Pure",
    "ReciprocalOp",
    "ReduceKind",
    "ReduceKindAttr",
    "ReduceOp",
    "ReluOp",
    "ReshapeOp",
    "RmsNormOp",
    "ScaleOp",
    "Shape",
    "SigmoidOp",
    "SiluOp",
    "SinOp",
    "SinhOp",
    "SliceOp",
    "SoftmaxOp",
    "SplitOp",
    "SqrtOp",
    "SubOp",
    "TanhOp",
    "TransposeOp",
    "UnaryElementwiseOp",
    "UnaryMeaning",
    "WeightOp",
    "WhereOp",
    "XorOp",
    "broadcast_shapes",
    "check_same_element_type",
    "concat_shape",
    "conv2d_shape",
    "element_type",
    "expand_shape",
    "fmt_shape",
    "gather_elements_shape",
    "gather_shape",
    "is_bool_type",
    "is_float_type",
    "is_integer_type",
    "matmul_shape",
    "normalize_axes",
    "normalize_axis",
    "pad_shape",
    "pool_shape",
    "reduce_shape",
    "slice_shape",
    "split_shapes",
    "static_shape",
    "tensor_type",
    "transpose_shape",
    "unary_meanings",
    "where_shape",
]
