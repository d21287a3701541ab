//===- Error.h - Status-carrying exception and the thread's last error ---===//
//
// Library code reports failures by throwing qopt::rt::Error; every C entry
// point catches it and turns it into a qopt_status plus a thread-local message.
// No exception crosses the C boundary.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_ERROR_H
#define QOPT_RUNTIME_SRC_ERROR_H

#include "qopt/runtime.h"

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace qopt::rt {

/// A failure with the status the C API returns for it.
class Error : public std::runtime_error {
public:
  Error(qopt_status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  qopt_status status() const { return status_; }

private:
  qopt_status status_;
};

/// Concatenates its arguments with operator<< into a string.
template <typename... Args> std::string cat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// Throws Error(status, cat(args...)).
template <typename... Args>
[[noreturn]] void fail(qopt_status status, Args &&...args) {
  throw Error(status, cat(std::forward<Args>(args)...));
}

/// Sets the calling thread's last-error message ("" clears it); one longer
/// than 1024 characters keeps its first 640 and last 384.
void setLastError(std::string message);
/// The calling thread's last-error message.
const char *lastError();

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_ERROR_H
