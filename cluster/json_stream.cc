// cluster/json_stream.cc - JsonStream (cluster/json_stream.h).
#include "cluster/json_stream.h"

#include <stdexcept>

namespace cluster {

void JsonStream::feed(std::string_view bytes, std::vector<std::string>& out) {
  size_t begin = 0;  // start of the part of `bytes` not yet copied into buf_
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (depth_ == 0) {
      if (c != '{' && c != '[') {
        ++skipped_;
        begin = i + 1;
        continue;
      }
      begin = i;
      depth_ = 1;
      continue;
    }
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      buf_.append(bytes.substr(begin, i + 1 - begin));
      out.push_back(std::move(buf_));
      buf_.clear();
      begin = i + 1;
    }
  }
  if (depth_ > 0) {
    buf_.append(bytes.substr(begin));
    if (buf_.size() > kMaxValueBytes) throw std::length_error("JSON value in stream exceeds 64 MiB");
  }
}

}  // namespace cluster
