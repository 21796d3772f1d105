// Where Gloo's results differ from NCCL's semantics, as documented
// deviations checked against Gloo's own arithmetic over every reduction order
// (docs/peers.md, findings 4 and 9).
#pragma once

#include "harness/peers/implementation.h"

namespace collcheck {

// The deviation of Gloo's dtype and op: `legacy`, as the legacy algorithms
// call their ReductionFunction in place (acc = op(acc, x)); otherwise as the
// options API calls op(out, a, b) with out aliasing an operand. None where
// Gloo agrees with NCCL.
const Deviation* gloo_deviation(DType t, RedOp op, bool legacy);

}  // namespace collcheck
