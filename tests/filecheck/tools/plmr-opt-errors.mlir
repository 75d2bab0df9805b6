// Bad input gives one error message and exit status 1, never a traceback.
// RUN: not plmr-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not plmr-opt %s -p 'canonicalize{bogus=1}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not plmr-opt %s.missing 2>&1 | filecheck %s --check-prefix=FILE
// RUN: not plmr-opt %S/inputs/unparsable.mlir 2>&1 | filecheck %s --check-prefix=PARSE
// RUN: not plmr-opt %S/inputs/invalid-shape.mlir 2>&1 | filecheck %s --check-prefix=VERIFY

// PASS: plmr-opt: error: bad pass pipeline: Unrecognized passes: ['no-such-pass']
// PASS-NOT: Traceback
// OPTION: plmr-opt: error: bad pass pipeline: canonicalize: option bogus=1: Provided arguments ["bogus"] not found
// FILE: plmr-opt: error: no such file: {{.*}}plmr-opt-errors.mlir.missing
// PARSE: plmr-opt: error: {{.*}}unparsable.mlir:3:22
// PARSE: Expected ':'
// PARSE-NOT: Traceback
// VERIFY: plmr-opt: error: shapes 2x3 and 4x3 are not broadcast-compatible (dimension -2: 2 vs 4)
// VERIFY: ^^^^^^^^^^
// VERIFY-NOT: Traceback

func.func @ok(%a: tensor<2xf32>) -> tensor<2xf32> {
  func.return %a : tensor<2xf32>
}
