//===- Error.cpp - Thread-local last-error message ------------------------===//
#include "Error.h"

namespace qopt::rt {

namespace {
thread_local std::string tlsLastError;
} // namespace

void setLastError(std::string message) {
  // A message names its field by path and may quote an expression: a
  // pathological input (an expression thousands of levels deep) would make
  // it kilobytes long. Both ends stay, where the field and the problem are.
  constexpr size_t kMax = 1024, kEnd = 384;
  if (message.size() > kMax) {
    size_t cut = message.size() - kMax;
    message = message.substr(0, kMax - kEnd) + " ... (" +
              std::to_string(cut) + " characters left out) ... " +
              message.substr(message.size() - kEnd);
  }
  tlsLastError = std::move(message);
}

const char *lastError() { return tlsLastError.c_str(); }

} // namespace qopt::rt
