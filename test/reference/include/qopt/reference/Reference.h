//===- Reference.h - qopt's independent numerics reference (umbrella) -----===//
//
// The C++ oracle the compiler's kernels are tested against: plain float32
// arithmetic (built with -ffp-contract=off, SSE on x86-64), written in the seed
// references' order of operations. See test/reference/README.md.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_REFERENCE_H
#define QOPT_REFERENCE_REFERENCE_H

#include "qopt/reference/Buffer.h"
#include "qopt/reference/Codebook.h"
#include "qopt/reference/Ecc.h"
#include "qopt/reference/Elementary.h"
#include "qopt/reference/Float.h"
#include "qopt/reference/Group.h"
#include "qopt/reference/Overflow.h"
#include "qopt/reference/Philox.h"
#include "qopt/reference/Step.h"

#endif // QOPT_REFERENCE_REFERENCE_H
