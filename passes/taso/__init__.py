"""
TASO-style graph substitutions for the `graph` dialect.

- `ops`: the substitution op set, as `(kind, params)` keys with shape inference;
- `rules`: rules as data (pairs of `func.func` in the `graph` dialect) and their text form;
- `semantics`: the ops on numpy arrays (fingerprints, exact re-tests, Z3 terms);
- `generator`: TASO's enumerate-fingerprint-prune rule generator;
- `verifier`: exact-integer random tests and Z3 proofs on small concrete shapes;
- `cost`: an analytic per-op cost on a wafer-scale `Device`;
- `dag`, `matcher`, `search`: the cost-based backtracking search behind the
  `taso-substitute` pass (`substitute`).
"""
