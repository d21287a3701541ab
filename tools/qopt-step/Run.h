//===- Run.h - What qopt-step does ------------------------------*- C++ -*-===//
//
// The three things qopt-step does once its command line is parsed: step the
// inputs and write the result atomically, describe a kernel, or write an
// example input. Each returns the exit status or throws.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_TOOLS_QOPT_STEP_RUN_H
#define QOPT_TOOLS_QOPT_STEP_RUN_H

#include "Options.h"

namespace qopt::step {

/// Steps the inputs o.steps times and writes --out through a temporary file
/// and a rename (on any error --out is left as it was).
int runSteps(const Options &o);
/// Prints the kernel's streams, hyperparameters and tables (--describe).
int describe(const Options &o);
/// Writes an example input for the kernel (--make-example).
int makeExample(const Options &o);

} // namespace qopt::step

#endif // QOPT_TOOLS_QOPT_STEP_RUN_H
