//===- SafeTensors.cpp - Small safetensors reader / writer ----------------===//
#include "qopt/safetensors/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_set>

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

/// The bytes of a tensor of `dtype` and `shape`; throws Error for a negative
/// dimension or a size beyond int64.
static uint64_t byteSize(const std::string &dtype, const std::vector<int64_t> &shape,
                         const std::string &what) {
  const size_t es = elementSize(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(what + ": negative dimension in shape " + shapeStr(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d / static_cast<int64_t>(es))
      throw Error(what + ": shape " + shapeStr(shape) + " is too large");
    n *= d;
  }
  return static_cast<uint64_t>(n) * es;
}

void Tensor::check(const std::string &what) const {
  const uint64_t bytes = byteSize(dtype, shape, what);
  if (data.size() != bytes)
    throw Error(what + ": " + std::to_string(data.size()) + " bytes do not match dtype " + dtype +
                " and shape " + shapeStr(shape) + " (" + std::to_string(bytes) + " bytes)");
}

std::string printableName(const std::string &name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      static const char *hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {

/// An open file descriptor, closed at the end of its scope.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }

private:
  int fd_;
};

/// Reads exactly `n` bytes at `offset`; throws Error (after `where`) when
/// the file ends first, which it does only if it shrank after fstat.
void readAt(int fd, void *out, size_t n, uint64_t offset, uint64_t size,
            const std::string &where) {
  auto *p = static_cast<char *>(out);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw Error(where + "cannot read the file: " + std::strerror(errno));
    if (got == 0)
      throw Error(where + "the file shrank while it was read (it had " + std::to_string(size) +
                  " bytes when opened, and ends at byte " + std::to_string(offset) + ")");
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

const char *describeFileType(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

File File::load(const std::string &path) {
  const std::string where = "safetensors '" + path + "': ";
  // Without blocking: a FIFO with no writer would block open itself.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0)
    throw Error(where + "cannot open the file (missing or unreadable)");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw Error(where + "cannot read the file: " + std::strerror(errno));
  // Anything else (a FIFO, /dev/zero, a directory) has no size to trust and
  // could be read without bound.
  if (!S_ISREG(st.st_mode))
    throw Error(where + "it is " + describeFileType(st.st_mode) + ", not a regular file");
  return loadOpenFile(fd.get(), static_cast<uint64_t>(st.st_size), path);
}

namespace {

/// SAX handler that records the first key given twice in one JSON object:
/// the keys of each open object, innermost last, in hash sets.
class RepeatedKeyFinder {
public:
  std::optional<std::string> repeated;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t &) { return true; }
  bool string(json::string_t &) { return true; }
  bool binary(json::binary_t &) { return true; }
  bool start_object(std::size_t) {
    keys_.emplace_back();
    return true;
  }
  bool key(json::string_t &k) {
    if (!keys_.empty() && !keys_.back().insert(k).second && !repeated)
      repeated = k;
    return !repeated;
  }
  bool end_object() {
    if (!keys_.empty())
      keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string &, const json::exception &) { return false; }

private:
  std::vector<std::unordered_set<std::string>> keys_;
};

/// The first key that `text` (valid JSON) gives twice in one object, if any
/// (the empty key included).
std::optional<std::string> firstRepeatedKey(const std::string &text) {
  RepeatedKeyFinder finder;
  json::sax_parse(text.begin(), text.end(), &finder);
  return finder.repeated;
}

} // namespace

File File::loadOpenFile(int fd, uint64_t size, const std::string &path) {
  File f;
  f.path_ = path;
  const std::string where = f.where();
  if (size < 8)
    throw Error(where + "file is " + std::to_string(size) +
                " bytes, shorter than the 8-byte header length");
  uint8_t lenBytes[8];
  readAt(fd, lenBytes, 8, 0, size, where);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i)
    hlen = (hlen << 8) | lenBytes[i];
  if (hlen > size - 8)
    throw Error(where + "header length " + std::to_string(hlen) + " runs past the end of the file (" +
                std::to_string(size) + " bytes)");
  if (hlen > kMaxHeaderBytes)
    throw Error(where + "header length " + std::to_string(hlen) + " is more than the format's " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  std::string headerText(static_cast<size_t>(hlen), '\0');
  readAt(fd, headerText.data(), headerText.size(), 8, size, where);
  json header;
  try {
    header = json::parse(headerText.begin(), headerText.end());
  } catch (const json::exception &e) {
    throw Error(where + "header is not valid JSON: " + e.what());
  }
  // A key given twice in one object (the parser keeps the last one) is
  // refused. A separate SAX pass finds it in time linear in the header; the
  // parser callback that did this rescanned the enclosing object at each
  // object's end, quadratic in the number of tensors.
  const std::optional<std::string> repeated = firstRepeatedKey(headerText);
  headerText = std::string();
  if (repeated)
    throw Error(where + "header gives the key '" + printableName(*repeated) +
                "' twice in one object");
  if (!header.is_object())
    throw Error(where + "header is not a JSON object");
  const uint64_t dataBegin = 8 + hlen;
  const uint64_t dataSize = size - dataBegin;
  // Every entry is checked against the file's size before any tensor's
  // bytes are allocated or read.
  struct Entry {
    std::string name;
    Tensor tensor;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object())
        throw Error(where + "__metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          throw Error(where + "__metadata__ value '" + printableName(m.key()) +
                      "' is not a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = where + "tensor '" + printableName(it.key()) + "'";
    // A control character (a NUL cut every message after it) names no tensor.
    if (printableName(it.key()) != it.key())
      throw Error(what + ": a tensor name must not contain control characters");
    if (it.key().empty())
      throw Error(what + ": empty tensor name");
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
      if (d.is_number_unsigned() &&
          d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error(what + ": dimension " + std::to_string(d.get<uint64_t>()) +
                    " is too large (the largest is 2^63 - 1)");
      t.shape.push_back(d.get<int64_t>());
    }
    const json &off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw Error(what + ": data_offsets must be non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en)
      throw Error(what + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                  "] end before they begin");
    if (en > dataSize)
      throw Error(what + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                  "] lie outside the " + std::to_string(dataSize) + " data bytes");
    const uint64_t bytes = byteSize(t.dtype, t.shape, what);
    if (en - b != bytes)
      throw Error(what + ": " + std::to_string(en - b) + " bytes do not match dtype " + t.dtype +
                  " and shape " + shapeStr(t.shape) + " (" + std::to_string(bytes) + " bytes)");
    if (en > b)
      ranges.emplace_back(b, en);
    entries.push_back({it.key(), std::move(t), b, en});
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
  // Now the bytes: the tensors cover exactly the file's size.
  for (Entry &e : entries) {
    e.tensor.data.resize(static_cast<size_t>(e.end - e.begin));
    readAt(fd, e.tensor.data.data(), e.tensor.data.size(), dataBegin + e.begin, size, where);
    f.tensors_.emplace(std::move(e.name), std::move(e.tensor));
  }
  uint8_t extra;
  if (::pread(fd, &extra, 1, static_cast<off_t>(size)) > 0)
    throw Error(where + "the file grew while it was read (it had " + std::to_string(size) +
                " bytes when opened)");
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
  if (name == "__metadata__" || name.empty() || printableName(name) != name)
    throw Error(where() + "invalid tensor name '" + printableName(name) + "'");
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
