//===- qopt-step.cpp - N optimizer steps on tensors from safetensors files ===//
//
// Reads the tensors of a kernel's streams from safetensors files, named
// `<tensor>/<stream>` (`wte/p`, `wte/p.ecc`, `wte/g`, `wte/m.codes`, ...), steps
// every tensor N times in one launch per step through the runtime (host
// backend or CUDA), and writes the state streams (every read-write stream) and
// the codebook tables to one safetensors file. See docs/qopt-step.md.
//
// Every problem with the inputs is found before anything runs, and the output
// is written to a temporary file in the same directory and renamed over the
// output only when everything succeeded: on any error the output file is left
// as it was and the exit status is 1 (2 for a command-line mistake).
//
// No LLVM/MLIR: the runtime's C API (through runtime.hpp) and qopt_safetensors.
//
//===----------------------------------------------------------------------===//

#include "Options.h"
#include "Run.h"
#include "Support.h"

#include "qopt/runtime.hpp"
#include "qopt/safetensors/SafeTensors.h"

#include <iostream>
#include <new>

using namespace qopt::step;
namespace st = qopt::st;

int main(int argc, char **argv) {
  try {
    Options o = parseArgs(argc, argv);
    if (o.describe)
      return describe(o);
    if (!o.makeExample.empty())
      return makeExample(o);
    return runSteps(o);
  } catch (const UsageError &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n"
              << "(qopt-step --help for the options)\n";
    return 2;
  } catch (const Failure &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n";
    return 1;
  } catch (const qopt::Error &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n";
    return 1;
  } catch (const st::Error &e) {
    std::cerr << "qopt-step: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "qopt-step: error: out of host memory\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "qopt-step: error: internal error: " << e.what() << "\n";
    return 1;
  }
}
