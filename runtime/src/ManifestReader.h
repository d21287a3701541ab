//===- ManifestReader.h - Typed, located reads of a manifest's JSON -------===//
//
// What Manifest.cpp reads a manifest with: typed fields out of JSON objects,
// every error naming the source and the dotted path of the field, and the
// line and column of a JSON syntax error (ErrorPositionSax finds those that
// nlohmann reports without an offset).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_MANIFESTREADER_H
#define QOPT_RUNTIME_SRC_MANIFESTREADER_H

#include "DType.h"
#include "Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qopt::rt {

using json = nlohmann::json;

/// The manifest's dtype names, for messages.
constexpr const char *kAllDtypes = "f32, bf16, f16, int8, uint8, int16";

/// Byte offset `byte` of `text` as 1-based line and column.
inline std::pair<size_t, size_t> lineColumn(std::string_view text, size_t byte) {
  byte = std::min(byte, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

/// A SAX handler that builds nothing and keeps where parsing failed: the
/// position of errors that nlohmann reports without one (a number that
/// overflows float64 is an out_of_range exception with no byte offset).
struct ErrorPositionSax : json::json_sax_t {
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string &lastToken,
                   const nlohmann::detail::exception &) override {
    // `position` is just past the offending token.
    start = position >= lastToken.size() ? position - lastToken.size() : 0;
    failed = true;
    return false;
  }
  size_t start = 0;
  bool failed = false;
};

/// A SAX handler that builds nothing and finds the first key that appears
/// twice in one object (nlohmann keeps the last silently; a manifest whose
/// "version" or "kernel" is given twice is ambiguous): its dotted path
/// ("launch.tile_elements", "streams[2].dtype") in `duplicate`.
struct DuplicateKeySax : json::json_sax_t {
  struct Frame {
    bool array = false;
    long index = -1;      ///< an array's element being read
    std::string key;      ///< an object's member being read
    std::vector<std::string> keys;
  };
  std::vector<Frame> frames;
  std::string duplicate;

  void value() {
    if (!frames.empty() && frames.back().array)
      ++frames.back().index;
  }
  std::string path(const std::string &last) const {
    std::string p;
    for (const Frame &f : frames) {
      if (&f == &frames.back())
        break;
      p += f.array ? "[" + std::to_string(f.index) + "]"
                   : (p.empty() ? "" : ".") + f.key;
    }
    return p + (p.empty() ? "" : ".") + last;
  }
  bool null() override { return value(), true; }
  bool boolean(bool) override { return value(), true; }
  bool number_integer(number_integer_t) override { return value(), true; }
  bool number_unsigned(number_unsigned_t) override { return value(), true; }
  bool number_float(number_float_t, const string_t &) override {
    return value(), true;
  }
  bool string(string_t &) override { return value(), true; }
  bool binary(binary_t &) override { return value(), true; }
  bool start_object(std::size_t) override {
    value();
    frames.push_back({});
    return true;
  }
  bool key(string_t &k) override {
    Frame &f = frames.back();
    if (std::find(f.keys.begin(), f.keys.end(), k) != f.keys.end()) {
      duplicate = path(k);
      return false;
    }
    f.keys.push_back(k);
    f.key = k;
    return true;
  }
  bool end_object() override { return frames.pop_back(), true; }
  bool start_array(std::size_t) override {
    value();
    frames.push_back({true});
    return true;
  }
  bool end_array() override { return frames.pop_back(), true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &) override {
    return false;
  }
};

/// Reads typed fields out of JSON objects; every error names the source and
/// the dotted path of the field.
class Reader {
public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void error(const std::string &field,
                          const std::string &message) const {
    fail(QOPT_ERROR_MANIFEST, source_, ": field '", field, "': ", message);
  }

  static std::string join(const std::string &path, const std::string &key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string &path, size_t i) {
    return cat(path, "[", i, "]");
  }

  /// The member `key` of `obj`, or null when absent and not required.
  const json *member(const json &obj, const std::string &path,
                     const char *key, bool required) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        error(join(path, key), "missing");
      return nullptr;
    }
    return &*it;
  }

  void expectObject(const json &j, const std::string &field) const {
    if (!j.is_object())
      error(field, cat("expected an object, got ", j.type_name()));
  }
  void expectArray(const json &j, const std::string &field) const {
    if (!j.is_array())
      error(field, cat("expected an array, got ", j.type_name()));
  }

  std::string string(const json &obj, const std::string &path, const char *key,
                     bool required, const std::string &def = {},
                     bool allowEmpty = false) const {
    const json *j = member(obj, path, key, required);
    if (!j)
      return def;
    if (!j->is_string())
      error(join(path, key), cat("expected a string, got ", j->type_name()));
    std::string s = j->get<std::string>();
    if (s.empty() && !allowEmpty)
      error(join(path, key), "must not be empty");
    return s;
  }

  int64_t integer(const json &obj, const std::string &path, const char *key,
                  bool required, int64_t def, int64_t min, int64_t max) const {
    const json *j = member(obj, path, key, required);
    if (!j)
      return def;
    std::string field = join(path, key);
    if (!j->is_number_integer())
      error(field, cat("expected an integer, got ",
                       j->is_number() ? j->dump() : j->type_name()));
    int64_t v;
    if (j->is_number_unsigned()) {
      uint64_t u = j->get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        error(field, cat(u, " is out of range [", min, ", ", max, "]"));
      v = static_cast<int64_t>(u);
    } else {
      v = j->get<int64_t>();
    }
    if (v < min || v > max)
      error(field, cat(v, " is out of range [", min, ", ", max, "]"));
    return v;
  }

  std::optional<double> number(const json &obj, const std::string &path,
                               const char *key) const {
    const json *j = member(obj, path, key, false);
    if (!j)
      return std::nullopt;
    if (j->is_boolean())
      return j->get<bool>() ? 1.0 : 0.0;
    if (!j->is_number())
      error(join(path, key), cat("expected a number, got ", j->type_name()));
    return j->get<double>();
  }

  bool boolean(const json &obj, const std::string &path, const char *key,
               bool def) const {
    const json *j = member(obj, path, key, false);
    if (!j)
      return def;
    if (!j->is_boolean())
      error(join(path, key),
            cat("expected true or false, got ",
                j->is_primitive() ? j->dump() : j->type_name()));
    return j->get<bool>();
  }

  /// A dtype field restricted to `allowed`.
  qopt_dtype dtype(const json &obj, const std::string &path, const char *key,
                   bool required, std::initializer_list<qopt_dtype> allowed,
                   const char *what, qopt_dtype def = QOPT_DTYPE_INVALID) const {
    const json *j = member(obj, path, key, required);
    if (!j)
      return def;
    std::string s = string(obj, path, key, true);
    qopt_dtype d = parseDtype(s);
    if (d == QOPT_DTYPE_INVALID)
      error(join(path, key),
            cat("unknown dtype \"", s, "\" (expected one of ", kAllDtypes, ")"));
    if (std::find(allowed.begin(), allowed.end(), d) == allowed.end()) {
      std::string list;
      for (qopt_dtype a : allowed)
        list += (list.empty() ? "" : ", ") + std::string(dtypeName(a));
      error(join(path, key),
            cat("dtype \"", s, "\" is not allowed for ", what, " (expected ",
                list, ")"));
    }
    return d;
  }

  const std::string &source() const { return source_; }

private:
  std::string source_;
};

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_MANIFESTREADER_H
