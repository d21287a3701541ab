//===- Error.cpp - Thread-local last-error message ------------------------===//
#include "Error.h"

namespace qopt::rt {

namespace {
thread_local std::string tlsLastError;
} // namespace

void setLastError(std::string message) { tlsLastError = std::move(message); }

const char *lastError() { return tlsLastError.c_str(); }

} // namespace qopt::rt
