//===- SafeTensors.cpp - Small safetensors reader / writer ----------------===//
#include "qopt/reference/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <fstream>
#include <limits>
#include <sstream>

namespace qopt::st {

using json = nlohmann::json;

size_t elementSize(const std::string &dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U8", 1},  {"U16", 2}, {"U32", 4},  {"U64", 8}, {"BOOL", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end())
    throw Error("unknown safetensors dtype '" + dtype + "'");
  return it->second;
}

static std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

void Tensor::check(const std::string &what) const {
  const size_t es = elementSize(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(what + ": negative dimension in shape " + shapeStr(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d / static_cast<int64_t>(es))
      throw Error(what + ": shape " + shapeStr(shape) + " is too large");
    n *= d;
  }
  if (data.size() != static_cast<size_t>(n) * es)
    throw Error(what + ": " + std::to_string(data.size()) + " bytes do not match dtype " + dtype +
                " and shape " + shapeStr(shape) + " (" + std::to_string(static_cast<size_t>(n) * es) +
                " bytes)");
}

File File::load(const std::string &path) {
  File f;
  f.path_ = path;
  const std::string where = f.where();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(where + "cannot open the file (missing or unreadable)");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8)
    throw Error(where + "file is " + std::to_string(bytes.size()) +
                " bytes, shorter than the 8-byte header length");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i)
    hlen = (hlen << 8) | bytes[static_cast<size_t>(i)];
  if (hlen > bytes.size() - 8)
    throw Error(where + "header length " + std::to_string(hlen) + " runs past the end of the file (" +
                std::to_string(bytes.size()) + " bytes)");
  json header;
  // A key given twice in one object (the parser would keep the last one):
  // the keys seen in each open object, innermost last.
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  auto noRepeatedKeys = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(hlen),
                         noRepeatedKeys);
  } catch (const json::exception &e) {
    throw Error(where + "header is not valid JSON: " + e.what());
  }
  if (!repeated.empty())
    throw Error(where + "header gives the key '" + repeated + "' twice in one object");
  if (!header.is_object())
    throw Error(where + "header is not a JSON object");
  const size_t dataBegin = 8 + static_cast<size_t>(hlen);
  const size_t dataSize = bytes.size() - dataBegin;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object())
        throw Error(where + "__metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          throw Error(where + "__metadata__ value '" + m.key() + "' is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = where + "tensor '" + it.key() + "'";
    const json &e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw Error(what + ": entry needs dtype, shape and data_offsets");
    if (!e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      throw Error(what + ": malformed dtype, shape or data_offsets");
    Tensor t;
    t.dtype = e["dtype"].get<std::string>();
    try {
      elementSize(t.dtype);
    } catch (const Error &err) {
      throw Error(what + ": " + err.what());
    }
    for (const json &d : e["shape"]) {
      if (!d.is_number_integer())
        throw Error(what + ": shape entries must be integers");
      t.shape.push_back(d.get<int64_t>());
    }
    const json &off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw Error(what + ": data_offsets must be non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > dataSize)
      throw Error(what + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                  "] lie outside the " + std::to_string(dataSize) + " data bytes");
    t.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(dataBegin + b),
                  bytes.begin() + static_cast<std::ptrdiff_t>(dataBegin + en));
    t.check(what);
    if (en > b)
      ranges.emplace_back(b, en);
    f.tensors_.emplace(it.key(), std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw Error(where + "two tensors overlap in the data section");
  // The tensors cover the data section with no hole and nothing after it, as
  // the format requires (no bytes that no tensor accounts for).
  uint64_t covered = 0;
  for (const auto &[b, en] : ranges) {
    if (b != covered)
      throw Error(where + "bytes " + std::to_string(covered) + " to " + std::to_string(b) +
                  " of the data section belong to no tensor");
    covered = en;
  }
  if (covered != dataSize)
    throw Error(where + std::to_string(dataSize - covered) +
                " bytes after the last tensor's data (the data section is " +
                std::to_string(dataSize) + " bytes, its tensors end at " + std::to_string(covered) +
                ")");
  return f;
}

void File::save(const std::string &path) const {
  json header = json::object();
  if (!metadata_.empty())
    header["__metadata__"] = metadata_;
  uint64_t off = 0;
  for (const auto &[name, t] : tensors_) {
    t.check("safetensors '" + path + "': tensor '" + name + "'");
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.data.size()}}};
    off += t.data.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw Error("safetensors '" + path + "': cannot create the file");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>((static_cast<uint64_t>(h.size()) >> (8 * i)) & 0xffu);
  out.write(reinterpret_cast<const char *>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto &[name, t] : tensors_)
    out.write(reinterpret_cast<const char *>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!out)
    throw Error("safetensors '" + path + "': write failed");
}

std::vector<std::string> File::names() const {
  std::vector<std::string> out;
  for (const auto &kv : tensors_)
    out.push_back(kv.first);
  return out;
}

const Tensor &File::get(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw Error(where() + "no tensor named '" + name + "'");
  return it->second;
}

const Tensor &File::get(const std::string &name, const std::string &dtype) const {
  const Tensor &t = get(name);
  if (t.dtype != dtype)
    throw Error(where() + "tensor '" + name + "' has dtype " + t.dtype + ", expected " + dtype);
  return t;
}

const Tensor &File::get(const std::string &name, const std::string &dtype,
                        const std::vector<int64_t> &shape) const {
  const Tensor &t = get(name, dtype);
  if (t.shape != shape)
    throw Error(where() + "tensor '" + name + "' has shape " + shapeStr(t.shape) + ", expected " +
                shapeStr(shape));
  return t;
}

void File::put(const std::string &name, Tensor t) {
  if (name == "__metadata__" || name.empty())
    throw Error(where() + "invalid tensor name '" + name + "'");
  t.check(where() + "tensor '" + name + "'");
  tensors_[name] = std::move(t);
}

const std::string &File::meta(const std::string &key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end())
    throw Error(where() + "no metadata key '" + key + "'");
  return it->second;
}

} // namespace qopt::st
