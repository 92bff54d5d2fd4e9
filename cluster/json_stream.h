// cluster/json_stream.h - splits a byte stream into the JSON values it carries one after
// another, as etcd's gateway streams a watch: one object per message, messages cut into chunks
// anywhere, several messages in one chunk. Tracks only nesting and strings (with escapes); the
// values are parsed by the caller. Not thread-safe (one per stream).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cluster {

class JsonStream {
 public:
  /// The most bytes one value may take before feed() throws std::length_error.
  static constexpr size_t kMaxValueBytes = 64u << 20;

  /// Appends `bytes` and moves each object or array completed by them, as text, to `out`.
  /// Anything between values that does not open one (whitespace, stray text) is skipped and
  /// counted in skipped().
  void feed(std::string_view bytes, std::vector<std::string>& out);
  /// Bytes of an incomplete value kept for the next feed().
  size_t buffered() const { return buf_.size(); }
  /// Bytes skipped outside values so far.
  size_t skipped() const { return skipped_; }

 private:
  std::string buf_;     // the value being read, from its opening brace
  int depth_ = 0;       // 0: between values
  bool in_string_ = false;
  bool escape_ = false;
  size_t skipped_ = 0;
};

}  // namespace cluster
