"""
Neptune-style fusion of reduction chains (rolling update and split-K update).

- `symbolic`: scalar `arith` / `math` expressions of a nest body to sympy and back;
- `repair`: derives the repair `h` of a reduction that reads an unfinished one, and
  proves that it distributes over the reduction's combiner;
- `nests`: IR utilities on `loop.nest`s (inlining, hoisting, common subexpressions);
- `fuse`: the `neptune-fuse` pass (its driver, `Fuser`), built on `split_k` (the split-K
  update), `rolling` (the rolling update) and `fusion` (terms, matches, IR helpers).
"""
