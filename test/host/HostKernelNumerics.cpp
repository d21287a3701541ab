//===- HostKernelNumerics.cpp - The host suites' cases -------------------===//
//
// The cases of HostKernelNumerics.h: every shipped spec (test/common/
// ShippedSpecCases.h) in its own parameter type and as <spec>.f16 and
// <spec>.f32, and the test-only specs of test/host/specs that cover what no
// shipped spec uses.
//
//===----------------------------------------------------------------------===//

#include "HostKernelNumerics.h"

namespace qopt::host_test {

using namespace qopt::test;

std::string kernelDir(bool shipped) {
  const char *dir = std::getenv(shipped ? "QOPT_TEST_KERNEL_DIR" : "QOPT_TEST_EXTRA_KERNEL_DIR");
  return dir && *dir ? dir : shipped ? QOPT_DEFAULT_KERNEL_DIR : QOPT_EXTRA_KERNEL_DIR;
}

/// test/host/specs/adamw_seed003.qopt: seed 003's group options on groups
/// of 8 (overflow = ieee) and 64 (overflow = saturate, f32 scales), an f16
/// parameter with int16 error bits, an f32 gradient.
ref::StepSpec seed003Groups() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::EccI16);
  s.param = ref::DType::F16;
  s.grad = ref::DType::F32;
  s.states[0].group = ref::GroupScheme::seed003(/*isSigned=*/true, ref::Companding::Softsign);
  s.states[0].group.group = 8;
  s.states[1].group = ref::GroupScheme::seed003(/*isSigned=*/false, ref::Companding::Sqrt);
  s.states[1].group.group = 64;
  s.states[1].group.scaleDType = ref::ScaleDType::F32;
  s.states[1].group.overflow = ref::Overflow::Saturate;
  return s;
}

/// test/host/specs/adamw_plain.qopt: plain bf16 and f32 states, an f32
/// parameter, an f16 gradient.
ref::StepSpec plainStates() {
  ref::StepSpec s = ref::flashAdamW(adamHyper(), ref::Master::None);
  s.param = ref::DType::F32;
  s.grad = ref::DType::F16;
  s.states = {ref::StateScheme::plainBF16("m"), ref::StateScheme::plainF32("v")};
  return s;
}

/// test/host/specs/reduction_probe.qopt: every reduction of the gradient.
ref::StepSpec reductionProbe() {
  ref::StepSpec s = plainBf16(ref::Optimizer::ReductionProbe, ref::Hyper(),
                              {"a", "b", "c", "d"}, {}, /*state32=*/true);
  s.param = ref::DType::F32;
  s.grad = ref::DType::F32;
  return s;
}


ref::StepSpec retyped(ref::StepSpec s, ref::DType t) {
  s.param = t;
  s.grad = t;
  // Stochastic rounding and the Kahan compensation are bf16's: the f16
  // variant rounds to nearest.
  if (t == ref::DType::F32 || s.master == ref::Master::Stochastic ||
      s.master == ref::Master::KahanBF16)
    s.master = ref::Master::None;
  return s;
}

/// Every shipped spec as `<spec>.<suffix>` in parameter type `t`.
void addVariants(std::vector<Case> &all, const std::string &suffix, ref::DType t) {
  std::vector<SpecCase> specs = shippedSpecCases();
  for (const SpecCase &c : reductionSpecCases())
    specs.push_back(c);
  for (const SpecCase &c : specs) {
    std::function<ref::StepSpec()> make = c.make;
    all.push_back({c.spec + "." + suffix, [make, t] { return retyped(make(), t); }, c.hypers});
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const SpecCase &c : shippedSpecCases())
    all.push_back({c.spec, c.make, c.hypers});
  for (const SpecCase &c : reductionSpecCases())
    all.push_back({c.spec, c.make, c.hypers});
  addVariants(all, "f16", ref::DType::F16);
  addVariants(all, "f32", ref::DType::F32);
  all.push_back({"adamw_seed003", seed003Groups, kAdamHypers, /*shipped=*/false});
  all.push_back({"adamw_plain", plainStates, kAdamHypers, /*shipped=*/false});
  all.push_back({"reduction_probe", reductionProbe, {}, /*shipped=*/false});
  return all;
}

void PrintTo(const Case &c, std::ostream *os) { *os << c.spec; }

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  std::string name = info.param.spec;
  for (char &ch : name)
    if (ch == '.')
      ch = '_';
  return name;
}

} // namespace qopt::host_test
