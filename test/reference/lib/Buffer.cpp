//===- Buffer.cpp - Typed byte buffers ------------------------------------===//
#include "qopt/reference/Buffer.h"

#include "qopt/reference/Float.h"

#include <cstring>
#include <stdexcept>

namespace qopt::ref {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::None: return 0;
  case DType::F32: return 4;
  case DType::BF16: case DType::F16: case DType::I16: return 2;
  case DType::I8: case DType::U8: return 1;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::None: return "none";
  case DType::F32: return "f32";
  case DType::BF16: return "bf16";
  case DType::F16: return "f16";
  case DType::I8: return "int8";
  case DType::U8: return "uint8";
  case DType::I16: return "int16";
  }
  return "?";
}

DType parseDType(const std::string &name) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I8, DType::U8, DType::I16})
    if (name == dtypeName(t))
      return t;
  throw std::invalid_argument("unknown dtype '" + name +
                              "' (expected f32, bf16, f16, int8, uint8 or int16)");
}

bool isFloatDType(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

Buffer::Buffer(DType dtype, int64_t count) : dtype_(dtype), count_(count) {
  if (count < 0)
    throw std::invalid_argument("Buffer: negative element count");
  bytes_.assign(static_cast<size_t>(count) * dtypeSize(dtype), 0);
}

void Buffer::checkElementSize(size_t size) const {
  if (size != dtypeSize(dtype_))
    throw std::logic_error(std::string("Buffer of ") + dtypeName(dtype_) +
                           " accessed with an element type of " + std::to_string(size) + " bytes");
}

Buffer Buffer::fromFloats(DType dtype, const std::vector<float> &values) {
  Buffer b(dtype, static_cast<int64_t>(values.size()));
  switch (dtype) {
  case DType::F32:
    if (!values.empty())
      std::memcpy(b.data(), values.data(), values.size() * 4);
    break;
  case DType::BF16:
    for (size_t i = 0; i < values.size(); ++i)
      b.as<uint16_t>()[i] = floatToBf16Bits(values[i]);
    break;
  case DType::F16:
    for (size_t i = 0; i < values.size(); ++i)
      b.as<uint16_t>()[i] = floatToF16Bits(values[i]);
    break;
  default:
    throw std::invalid_argument(std::string("Buffer::fromFloats: ") + dtypeName(dtype) +
                                " is not a float dtype");
  }
  return b;
}

Buffer Buffer::fromBytes(DType dtype, const void *raw, size_t bytes) {
  const size_t es = dtypeSize(dtype);
  if (es == 0 || bytes % es != 0)
    throw std::invalid_argument(std::string("Buffer::fromBytes: ") + std::to_string(bytes) +
                                " bytes is not a whole number of " + dtypeName(dtype));
  Buffer b(dtype, static_cast<int64_t>(bytes / es));
  if (bytes)
    std::memcpy(b.data(), raw, bytes);
  return b;
}

std::vector<float> Buffer::toFloats() const {
  std::vector<float> out(static_cast<size_t>(count_));
  switch (dtype_) {
  case DType::F32:
    if (count_)
      std::memcpy(out.data(), data(), bytes());
    break;
  case DType::BF16:
    for (int64_t i = 0; i < count_; ++i)
      out[i] = bf16BitsToFloat(as<uint16_t>()[i]);
    break;
  case DType::F16:
    for (int64_t i = 0; i < count_; ++i)
      out[i] = f16BitsToFloat(as<uint16_t>()[i]);
    break;
  default:
    throw std::invalid_argument(std::string("Buffer::toFloats: ") + dtypeName(dtype_) +
                                " is not a float dtype");
  }
  return out;
}

} // namespace qopt::ref
