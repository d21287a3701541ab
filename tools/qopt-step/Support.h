//===- Support.h - qopt-step errors and strings -----------------*- C++ -*-===//
//
// The two kinds of failure of qopt-step (exit status 1 and 2) and the string
// helpers every part of the tool formats its messages with.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_TOOLS_QOPT_STEP_SUPPORT_H
#define QOPT_TOOLS_QOPT_STEP_SUPPORT_H

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace qopt::step {

/// A problem with the inputs, the kernel or the environment (exit status 1).
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A mistake on the command line (exit status 2, with a hint to --help).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args> std::string cat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
template <typename... Args> [[noreturn]] void fail(Args &&...args) {
  throw Failure(cat(std::forward<Args>(args)...));
}
template <typename... Args> [[noreturn]] void usage(Args &&...args) {
  throw UsageError(cat(std::forward<Args>(args)...));
}

inline std::string join(const std::vector<std::string> &items, const char *sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? sep : "") + items[i];
  return out;
}

inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape)
    dims.push_back(std::to_string(d));
  return "[" + join(dims) + "]";
}

} // namespace qopt::step

#endif // QOPT_TOOLS_QOPT_STEP_SUPPORT_H
