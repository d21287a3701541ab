//===- Buffer.h - Typed byte buffers with the ABI's in-memory layout -------===//
//
// A Buffer holds one stream of docs/abi.md: `count` elements of one dtype, laid
// out exactly as the kernels see them (bf16/f16 as their 16-bit patterns, int8
// codes as bytes, f32 absmax as float32, ...), little-endian.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_REFERENCE_BUFFER_H
#define QOPT_REFERENCE_BUFFER_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qopt::ref {

/// Stream element types, named as in docs/abi.md (`f32 bf16 f16 int8 uint8 int16`).
enum class DType : uint8_t { None, F32, BF16, F16, I8, U8, I16 };

/// Bytes per element (0 for None).
size_t dtypeSize(DType t);
/// The ABI name: "f32", "bf16", "f16", "int8", "uint8", "int16" ("none").
const char *dtypeName(DType t);
/// Parses an ABI name; throws std::invalid_argument on anything else.
DType parseDType(const std::string &name);
/// True for f32, bf16 and f16.
bool isFloatDType(DType t);

/// One stream: `count` elements of `dtype`, zero-initialised.
class Buffer {
public:
  Buffer() = default;
  Buffer(DType dtype, int64_t count);

  DType dtype() const { return dtype_; }
  int64_t count() const { return count_; }
  size_t bytes() const { return bytes_.size(); }
  bool empty() const { return dtype_ == DType::None; }
  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }
  std::vector<uint8_t> &raw() { return bytes_; }
  const std::vector<uint8_t> &raw() const { return bytes_; }

  /// Typed access; throws std::logic_error if sizeof(T) != dtypeSize(dtype()).
  template <class T> T *as() {
    checkElementSize(sizeof(T));
    return reinterpret_cast<T *>(bytes_.data());
  }
  template <class T> const T *as() const {
    checkElementSize(sizeof(T));
    return reinterpret_cast<const T *>(bytes_.data());
  }

  /// A float stream (f32, or bf16/f16 rounded to nearest even) holding `values`.
  static Buffer fromFloats(DType dtype, const std::vector<float> &values);
  /// A buffer of `dtype` whose bytes are `raw` (size must be count * dtypeSize).
  static Buffer fromBytes(DType dtype, const void *raw, size_t bytes);
  /// The elements of a float stream as float32 (exact).
  std::vector<float> toFloats() const;

  /// Byte-for-byte equality, dtype and count included.
  bool operator==(const Buffer &o) const {
    return dtype_ == o.dtype_ && count_ == o.count_ && bytes_ == o.bytes_;
  }
  bool operator!=(const Buffer &o) const { return !(*this == o); }

private:
  void checkElementSize(size_t size) const;
  DType dtype_ = DType::None;
  int64_t count_ = 0;
  std::vector<uint8_t> bytes_;
};

} // namespace qopt::ref

#endif // QOPT_REFERENCE_BUFFER_H
