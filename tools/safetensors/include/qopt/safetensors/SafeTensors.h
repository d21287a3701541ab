//===- SafeTensors.h - Small safetensors reader / writer ------------------===//
//
// The format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "string", ...}}, then the raw tensor bytes (offsets
// relative to the end of the header). Used by qopt-step and by the reference
// tests. Depends only on nlohmann-json.
// Every failure throws qopt::st::Error with the file name and the reason.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_SAFETENSORS_SAFETENSORS_H
#define QOPT_SAFETENSORS_SAFETENSORS_H

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace qopt::st {

class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// safetensors dtype names accepted: F64 F32 F16 BF16 I64 I32 I16 I8 U8 U16 U32 U64 BOOL.
size_t elementSize(const std::string &dtype);

/// The largest header the format allows (safetensors' own limit, 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

/// `name` with each control character written as \xNN, for messages (a NUL
/// would end a C string there).
std::string printableName(const std::string &name);

struct Tensor {
  std::string dtype;          ///< "F32", "BF16", ...
  std::vector<int64_t> shape; ///< empty for a 0-dim tensor
  std::vector<uint8_t> data;  ///< numel() * elementSize(dtype) bytes, little-endian

  int64_t numel() const;
  /// A tensor of `dtype`/`shape` holding the elements of `values` (sizeof(T) must match).
  template <class T>
  static Tensor make(const std::string &dtype, std::vector<int64_t> shape,
                     const std::vector<T> &values) {
    Tensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data.resize(values.size() * sizeof(T));
    if (!values.empty())
      std::memcpy(t.data.data(), values.data(), t.data.size());
    t.check("<new tensor>");
    return t;
  }
  /// Throws Error unless data.size() == numel() * elementSize(dtype) and sizeof matches.
  void check(const std::string &what) const;
};

class File {
public:
  /// Reads and validates a whole file. Throws Error for a missing/unreadable file, one that
  /// is not a regular file (a FIFO, a device, a directory), a short file, a header length
  /// past the end, bad JSON, unknown dtypes, negative or overflowing shapes, a tensor name
  /// with a control character, offsets outside the data or not matching dtype x shape,
  /// overlapping tensors, and a file that shrinks or grows while it is read. The header is
  /// checked against the file's size before any tensor's bytes are allocated.
  static File load(const std::string &path);
  /// What load() does once it has opened `path` as `fd` and found it a regular file of
  /// `size` bytes: reads it through pread. (Tests change the file between the two.)
  static File loadOpenFile(int fd, uint64_t size, const std::string &path);
  /// Writes the file (header padded with spaces to a multiple of 8 bytes, tensors by name).
  void save(const std::string &path) const;

  bool has(const std::string &name) const { return tensors_.count(name) != 0; }
  std::vector<std::string> names() const;
  /// Throws Error naming the file and the tensor if it is missing.
  const Tensor &get(const std::string &name) const;
  /// As get(), and checks the dtype (and the shape): throws Error such as
  /// "tensor 'x' has dtype F16, expected F32" or "tensor 'x' has shape [3], expected [4]".
  const Tensor &get(const std::string &name, const std::string &dtype) const;
  const Tensor &get(const std::string &name, const std::string &dtype,
                    const std::vector<int64_t> &shape) const;
  /// The elements as a vector<T>; dtype must be given and match, sizeof(T) must match.
  template <class T> std::vector<T> vec(const std::string &name, const std::string &dtype) const {
    const Tensor &t = get(name, dtype);
    if (elementSize(dtype) != sizeof(T))
      throw Error(where() + "tensor '" + name + "': element type of size " +
                  std::to_string(sizeof(T)) + " cannot hold " + dtype);
    std::vector<T> out(static_cast<size_t>(t.numel()));
    if (!out.empty())
      std::memcpy(out.data(), t.data.data(), t.data.size());
    return out;
  }

  void put(const std::string &name, Tensor t);
  std::map<std::string, std::string> &metadata() { return metadata_; }
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  /// Throws Error if the key is missing.
  const std::string &meta(const std::string &key) const;
  const std::string &path() const { return path_; }

private:
  std::string where() const { return "safetensors '" + path_ + "': "; }
  std::string path_ = "<memory>";
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

} // namespace qopt::st

#endif // QOPT_SAFETENSORS_SAFETENSORS_H
