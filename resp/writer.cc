// resp/writer.cc - RESP2/RESP3 reply writer. See writer.h.
#include "resp/writer.h"

#include <charconv>
#include <cmath>

namespace resp {
namespace {

// Output buffer capacity kept across clear(); a larger one is released.
constexpr size_t kKeepCapacity = 1 << 20;

constexpr std::string_view kCrlf = "\r\n";

}  // namespace

void Writer::header(char type, int64_t n) {
  char buf[24];
  buf[0] = type;
  char* p = std::to_chars(buf + 1, buf + sizeof(buf) - 2, n).ptr;
  *p++ = '\r';
  *p++ = '\n';
  inline_.append(buf, static_cast<size_t>(p - buf));
}

void Writer::line(char type, std::string_view s) {
  const size_t at = inline_.size() + 1;
  inline_.push_back(type);
  inline_.append(s);
  for (size_t i = at; i < inline_.size(); ++i) {
    if (inline_[i] == '\r' || inline_[i] == '\n') inline_[i] = ' ';
  }
  inline_.append(kCrlf);
}

void Writer::simple(std::string_view s) { line('+', s); }

void Writer::error(std::string_view text) {
  line('-', text);
  ++errors_;
  if (observer_ != nullptr) observer_(observer_arg_, text);
}

void Writer::integer(int64_t v) { header(':', v); }

void Writer::bulk(std::string_view s) {
  header('$', static_cast<int64_t>(s.size()));
  inline_.append(s);
  inline_.append(kCrlf);
}

void Writer::bulk_ref(std::string_view s, Keepalive keepalive) {
  if (s.size() < kRefThreshold) {
    bulk(s);
    return;
  }
  header('$', static_cast<int64_t>(s.size()));
  refs_.push_back(Ref{inline_.size(), s, std::move(keepalive)});
  ref_bytes_ += s.size();
  inline_.append(kCrlf);
}

void Writer::null() { inline_.append(proto_ >= 3 ? "_\r\n" : "$-1\r\n"); }

void Writer::null_array() { inline_.append(proto_ >= 3 ? "_\r\n" : "*-1\r\n"); }

void Writer::array(size_t n) { header('*', static_cast<int64_t>(n)); }

void Writer::map(size_t n) {
  if (proto_ >= 3) {
    header('%', static_cast<int64_t>(n));
  } else {
    header('*', static_cast<int64_t>(2 * n));
  }
}

void Writer::set(size_t n) { header(proto_ >= 3 ? '~' : '*', static_cast<int64_t>(n)); }

void Writer::push(size_t n) { header(proto_ >= 3 ? '>' : '*', static_cast<int64_t>(n)); }

void Writer::dbl(double v) {
  char buf[40];
  std::string_view s;
  if (std::isinf(v)) {
    s = v > 0 ? "inf" : "-inf";
  } else if (std::isnan(v)) {
    s = "nan";
  } else {
    // Same digits as printf("%.17g"), which Redis 7.0 uses.
    char* end = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 17).ptr;
    s = std::string_view(buf, static_cast<size_t>(end - buf));
  }
  if (proto_ >= 3) {
    inline_.push_back(',');
    inline_.append(s);
    inline_.append(kCrlf);
  } else {
    bulk(s);
  }
}

void Writer::boolean(bool v) {
  if (proto_ >= 3) {
    inline_.append(v ? "#t\r\n" : "#f\r\n");
  } else {
    inline_.append(v ? ":1\r\n" : ":0\r\n");
  }
}

void Writer::verbatim(std::string_view fmt, std::string_view text) {
  if (proto_ < 3) {
    bulk(text);
    return;
  }
  if (fmt.size() != 3) fmt = "txt";
  header('=', static_cast<int64_t>(text.size() + 4));
  inline_.append(fmt);
  inline_.push_back(':');
  inline_.append(text);
  inline_.append(kCrlf);
}

void Writer::raw(std::string_view bytes) { inline_.append(bytes); }

void Writer::raw_ref(std::string_view bytes, Keepalive keepalive) {
  if (bytes.size() < kRefThreshold) {
    raw(bytes);
    return;
  }
  refs_.push_back(Ref{inline_.size(), bytes, std::move(keepalive)});
  ref_bytes_ += bytes.size();
}

void Writer::buffers(std::vector<OutBuffer>* out) const {
  out->clear();
  size_t pos = 0;
  for (const Ref& r : refs_) {
    if (r.inline_offset > pos) out->push_back({inline_.data() + pos, r.inline_offset - pos});
    out->push_back({r.bytes.data(), r.bytes.size()});
    pos = r.inline_offset;
  }
  if (pos < inline_.size()) out->push_back({inline_.data() + pos, inline_.size() - pos});
}

void Writer::rewind(const Mark& m) {
  if (m.inline_size > inline_.size() || m.refs > refs_.size()) return;  // not from this batch
  inline_.resize(m.inline_size);
  refs_.erase(refs_.begin() + static_cast<std::ptrdiff_t>(m.refs), refs_.end());
  ref_bytes_ = m.ref_bytes;
  errors_ = m.errors;
}

void Writer::clear() {
  if (inline_.capacity() > kKeepCapacity) {
    std::string().swap(inline_);
  } else {
    inline_.clear();
  }
  refs_.clear();
  ref_bytes_ = 0;
}

}  // namespace resp
