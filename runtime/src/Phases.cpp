//===- Phases.cpp - A kernel's launch arguments and its phases ------------===//
//
// The arguments of a launch by kind, and the launches a kernel with
// reductions makes before its step (docs/abi.md, "Reductions"): the reduce
// pre-pass over the step's tiles, then the finish, one block per tensor,
// then (step reductions) the combine, one block, on the step's stream, with
// the workspace of the step's staging buffer.
//
//===----------------------------------------------------------------------===//
#include "Kernel.h"

#include "Error.h"

#include <algorithm>

namespace qopt::rt {

std::vector<void *> LaunchArgs::params(const std::vector<ArgDesc> &args) {
  std::vector<void *> out;
  for (const ArgDesc &a : args) {
    switch (a.kind) {
    case ArgDesc::Kind::Descriptors:
      out.push_back(&descs);
      break;
    case ArgDesc::Kind::TileMap:
      out.push_back(&tileMap);
      break;
    case ArgDesc::Kind::NumTiles:
      out.push_back(&numTiles);
      break;
    case ArgDesc::Kind::Uniforms:
      out.push_back(&uniforms);
      break;
    case ArgDesc::Kind::Table:
      out.push_back(&tables[a.table]);
      break;
    case ArgDesc::Kind::WorkCounters:
      out.push_back(&workCounters);
      break;
    case ArgDesc::Kind::NumericsCounters:
      out.push_back(&numerics);
      break;
    case ArgDesc::Kind::ReductionPartials:
      out.push_back(&partials);
      break;
    case ArgDesc::Kind::ReductionValues:
      out.push_back(&values);
      break;
    case ArgDesc::Kind::NumTensors:
      out.push_back(&numTensors);
      break;
    case ArgDesc::Kind::StepPartials:
      out.push_back(&stepPartials);
      break;
    case ArgDesc::Kind::NumStepTensors:
      out.push_back(&numStepTensors);
      break;
    }
  }
  return out;
}

void Kernel::loadPhases() {
  phases_.clear();
  for (const PhaseDesc &p : manifest_->phases) {
    PhaseFunction f;
    cu::CUresult g =
        cu::driver().cuModuleGetFunction(&f.fn, module_, p.entry.c_str());
    if (g != cu::CUDA_SUCCESS)
      fail(QOPT_ERROR_NOT_FOUND, "entry point '", p.entry, "' of phase '",
           p.name, "' of kernel '", manifest_->kernel, "' not found in ",
           origin_, ": cuModuleGetFunction: ", cu::describe(g));
    // One wave of the blocks that fit (the phases take no dynamic shared
    // memory); one per multiprocessor where the driver cannot say.
    int resident = 1;
    if (auto occupancy =
            cu::driver().cuOccupancyMaxActiveBlocksPerMultiprocessor)
      if (occupancy(&resident, f.fn, static_cast<int>(p.threadsPerBlock), 0) !=
              cu::CUDA_SUCCESS ||
          resident < 1)
        resident = 1;
    f.maxBlocks = static_cast<int>(std::clamp<int64_t>(
        int64_t(ctx_->multiprocessors()) * resident, 1, INT32_MAX));
    phases_.push_back(f);
  }
}

size_t Kernel::combinePhase() const {
  const std::vector<PhaseDesc> &p = manifest_->phases;
  return !p.empty() && p.back().grid == PhaseDesc::Grid::One ? p.size() - 1
                                                             : p.size();
}

void Kernel::launchPhases(LaunchArgs &args, cu::CUstream stream, size_t from,
                          size_t to) {
  const Manifest &m = *manifest_;
  for (size_t i = from; i < to; ++i) {
    const PhaseDesc &p = m.phases[i];
    // Any grid is correct: a block steps a contiguous range of tiles, or
    // tensors k, k + gridDim.x, ...; the combine is exactly one block.
    int64_t work = p.grid == PhaseDesc::Grid::Tiles     ? args.numTiles
                   : p.grid == PhaseDesc::Grid::Tensors ? args.numTensors
                                                        : 1;
    auto grid = static_cast<unsigned>(
        std::clamp<int64_t>(work, 1, phases_[i].maxBlocks));
    std::vector<void *> params = args.params(p.args);
    cu::check(cu::driver().cuLaunchKernel(
                  phases_[i].fn, grid, 1, 1,
                  static_cast<unsigned>(p.threadsPerBlock), 1, 1, 0, stream,
                  params.data(), nullptr),
              "cuLaunchKernel",
              cat("for phase '", p.name, "' of kernel '", m.kernel, "' (",
                  grid, " blocks of ", p.threadsPerBlock, " threads)"));
  }
}

} // namespace qopt::rt
