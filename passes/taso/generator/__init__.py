"""
TASO's substitution generator, in Python.

1. **Enumerate** every graph of up to `max_ops` ops over the substitution op set, on small
   input tensors (2-D `x1..x3: 2x4`, `w1..w3: 4x4`; 4-D `i1, i2: 2x4x5x5`, conv kernels
   `k1, k2: 4x4x3x3`, `k3, k4: 4x4x1x1`), depth first. An op whose result equals a tensor the
   graph already has, or that repeats an op, ends the branch (as in TASO); independent
   ops are only added in one canonical order.
2. **Fingerprint** each graph: the hash of the multiset of its unused results' hashes,
   computed on random 64-bit integers (wrapping arithmetic is exact arithmetic modulo
   2^64). ReLU is replaced by the polynomial `x*(x+1)+1` while fingerprinting, as TASO
   does, and avg-pooling divides by 9 through its inverse modulo 2^64.
3. **Candidates**: every graph whose fingerprint an earlier graph already has is paired with
   that graph.
4. **Prune**, counting what each step removes: a re-test with the real semantics on fresh
   exact integers; input renaming; common subgraphs and supergraphs; degenerate rules (a
   tensor used as both conv input and kernel, disconnected sides, a scalar only one side
   uses, unused inputs); then the sides' shapes are generalized to symbols and the rules
   re-tested at several sizes by the verifier.

The package, by role: `enumeration` (steps 1–3), `pruning` (step 4 on rule sides),
`generalization` (symbolic shapes), `pipeline` (`generate_rules`).
"""

from plmr.passes.taso.generator.enumeration import (
    INPUTS_2D,
    INPUTS_4D,
    MAX_SIZE,
    Array,
    Bounds,
    EnumerationResult,
    Enumerator,
    GraphOps,
    InputSpec,
    Template,
    inputs_for,
    make_templates,
    propagate_bounds,
    split_params,
)
from plmr.passes.taso.generator.generalization import (
    REP_VALUES,
    Expr,
    GeneralizeError,
    Unifier,
    generalize,
    generalized_key,
)
from plmr.passes.taso.generator.pipeline import (
    ExactTrials,
    GenerationReport,
    generate_rules,
    same_outputs,
)
from plmr.passes.taso.generator.pruning import (
    degenerate_reason,
    has_common_subgraph,
    has_common_supergraph,
    map_ref,
    merged_instances,
    output_terms,
    renaming_key,
    replace_refs,
    to_pattern,
)

__all__ = [
    "INPUTS_2D",
    "INPUTS_4D",
    "MAX_SIZE",
    "REP_VALUES",
    "Array",
    "Bounds",
    "EnumerationResult",
    "Enumerator",
    "ExactTrials",
    "Expr",
    "GeneralizeError",
    "GenerationReport",
    "GraphOps",
    "InputSpec",
    "Template",
    "Unifier",
    "degenerate_reason",
    "generalize",
    "generalized_key",
    "generate_rules",
    "has_common_subgraph",
    "has_common_supergraph",
    "inputs_for",
    "make_templates",
    "map_ref",
    "merged_instances",
    "output_terms",
    "propagate_bounds",
    "renaming_key",
    "replace_refs",
    "same_outputs",
    "split_params",
    "to_pattern",
]
