// resp/parser.cc - incremental RESP2 request parser. See parser.h.
#include "resp/parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace resp {
namespace {

// Storage kept across requests up to this capacity; a larger buffer is released.
constexpr size_t kKeepCapacity = 1 << 20;

constexpr const char kErrTooBigInline[] = "ERR Protocol error: too big inline request";
constexpr const char kErrUnbalanced[] = "ERR Protocol error: unbalanced quotes in request";
constexpr const char kErrTooBigMbulk[] = "ERR Protocol error: too big mbulk count string";
constexpr const char kErrInvalidMbulk[] = "ERR Protocol error: invalid multibulk length";
constexpr const char kErrUnauthMbulk[] = "ERR Protocol error: unauthenticated multibulk length";
constexpr const char kErrTooBigBulk[] = "ERR Protocol error: too big bulk count string";
constexpr const char kErrInvalidBulk[] = "ERR Protocol error: invalid bulk length";
constexpr const char kErrUnauthBulk[] = "ERR Protocol error: unauthenticated bulk length";

// Redis's string2ll: optional '-', no '+', no leading zeros ("0" alone is fine, "-0" is not),
// no spaces, no overflow.
bool parse_ll(std::string_view s, int64_t* out) {
  if (s == "0") {
    *out = 0;
    return true;
  }
  const bool neg = !s.empty() && s[0] == '-';
  if (neg) s.remove_prefix(1);
  if (s.empty() || s[0] < '1' || s[0] > '9') return false;
  uint64_t v = 0;
  for (const char ch : s) {
    const unsigned d = static_cast<unsigned char>(ch) - unsigned{'0'};
    if (d > 9 || v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v > static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0)) return false;
  *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

// isspace() in the C locale.
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// sdssplitargs: appends each argument's bytes to `buf` and calls on_arg(offset, len).
template <class OnArg>
bool split_args(std::string_view in, std::string* buf, OnArg&& on_arg) {
  if (const void* z = std::memchr(in.data(), '\0', in.size())) {
    in = in.substr(0, static_cast<const char*>(z) - in.data());
  }
  const char* p = in.data();
  const char* const e = p + in.size();
  auto at = [e](const char* q) { return q < e ? *q : '\0'; };  // the C string's view
  for (;;) {
    while (p < e && is_space(*p)) ++p;
    if (p == e) return true;
    const size_t start = buf->size();
    bool inq = false, insq = false, done = false;
    while (!done) {
      const char c = at(p);
      if (inq) {
        if (c == '\\' && at(p + 1) == 'x' && hex_value(at(p + 2)) >= 0 &&
            hex_value(at(p + 3)) >= 0) {
          buf->push_back(static_cast<char>(hex_value(p[2]) * 16 + hex_value(p[3])));
          p += 3;
        } else if (c == '\\' && at(p + 1)) {
          ++p;
          switch (*p) {
            case 'n': buf->push_back('\n'); break;
            case 'r': buf->push_back('\r'); break;
            case 't': buf->push_back('\t'); break;
            case 'b': buf->push_back('\b'); break;
            case 'a': buf->push_back('\a'); break;
            default: buf->push_back(*p); break;
          }
        } else if (c == '"') {
          if (at(p + 1) && !is_space(at(p + 1))) return false;  // must be followed by a space
          done = true;
        } else if (!c) {
          return false;  // unterminated
        } else {
          buf->push_back(c);
        }
      } else if (insq) {
        if (c == '\\' && at(p + 1) == '\'') {
          ++p;
          buf->push_back('\'');
        } else if (c == '\'') {
          if (at(p + 1) && !is_space(at(p + 1))) return false;
          done = true;
        } else if (!c) {
          return false;
        } else {
          buf->push_back(c);
        }
      } else {
        switch (c) {
          case ' ': case '\n': case '\r': case '\t': case '\0': done = true; break;
          case '"': inq = true; break;
          case '\'': insq = true; break;
          default: buf->push_back(c); break;
        }
      }
      if (p < e) ++p;
    }
    on_arg(start, buf->size() - start);
  }
}

}  // namespace

bool split_inline_args(std::string_view line, std::vector<std::string>* out) {
  out->clear();
  std::string buf;
  return split_args(line, &buf, [&](size_t off, size_t len) { out->emplace_back(buf, off, len); });
}

Parser::Parser(ParserLimits limits, BulkAllocator alloc, size_t large_bulk_threshold)
    : limits_(limits), alloc_(std::move(alloc)), large_threshold_(large_bulk_threshold) {}

size_t Parser::feed(const char* data, size_t len, Status* status) {
  *status = Status::kNeedMore;
  if (state_ == State::kError) {
    *status = Status::kError;
    return 0;
  }
  if (done_) clear_request();
  if (state_ == State::kStart && len != 0 && *data == '*') {
    if (const size_t used = take_whole(data, len)) {
      *status = Status::kRequest;
      return used;
    }
  }
  const char* p = data;
  const char* const end = data + len;
  while (p < end) {
    switch (state_) {
      case State::kStart:
        state_ = *p == '*' ? State::kArrayLen : State::kInline;
        break;
      case State::kInline:
      case State::kArrayLen:
      case State::kBulkLen: {
        std::string_view line;
        const Line r = take_line(p, end, &line);
        if (r == Line::kPartial) break;
        if (r == Line::kTooBig) {
          fail(state_ == State::kInline   ? kErrTooBigInline
               : state_ == State::kArrayLen ? kErrTooBigMbulk
                                            : kErrTooBigBulk,
               status);
          return static_cast<size_t>(p - data);
        }
        const bool ready = on_line(line, status);
        line_.clear();
        if (ready || state_ == State::kError) return static_cast<size_t>(p - data);
        break;
      }
      case State::kBulkBody:
      case State::kLargeBody: {
        const size_t n = std::min(static_cast<size_t>(bulk_len_ - bulk_have_),
                                  static_cast<size_t>(end - p));
        if (state_ == State::kBulkBody) {
          storage_.append(p, n);
        } else {
          std::memcpy(large_.back().data + bulk_have_, p, n);
        }
        p += n;
        bulk_have_ += static_cast<int64_t>(n);
        if (bulk_have_ == bulk_len_) state_ = State::kBulkCrlf;
        break;
      }
      case State::kDiscardBody: {  // a bulk the allocator dropped: skip its bytes
        const size_t n = std::min(static_cast<size_t>(bulk_len_ - bulk_have_),
                                  static_cast<size_t>(end - p));
        p += n;
        bulk_have_ += static_cast<int64_t>(n);
        if (bulk_have_ == bulk_len_) state_ = State::kBulkCrlf;
        break;
      }
      case State::kBulkCrlf: {
        // Redis 7.0 skips the two bytes after a bulk without checking that they are "\r\n".
        const size_t n = std::min(2 - crlf_have_, static_cast<size_t>(end - p));
        p += n;
        crlf_have_ += n;
        if (crlf_have_ == 2 && end_bulk()) {
          *status = Status::kRequest;
          return static_cast<size_t>(p - data);
        }
        break;
      }
      case State::kError:
        *status = Status::kError;
        return static_cast<size_t>(p - data);
    }
  }
  return len;
}

namespace {

// The length after a '*' or '$' at `p` (< end) when it is a plain decimal of 1 to 18 digits
// without a leading zero ("0" alone too) followed by '\r' and one more byte: *value, and `p`
// moved past that byte. False for anything else (a sign, a NUL, an overflow, a line not yet
// whole), which the state machine then parses, with its errors.
inline bool take_length(const char*& p, const char* end, int64_t* value) {
  const char* q = p + 1;
  const char* const digits = q;
  int64_t v = 0;
  while (q < end && static_cast<unsigned char>(*q - '0') <= 9 && q - digits < 18)
    v = v * 10 + (*q++ - '0');
  const size_t n = static_cast<size_t>(q - digits);
  if (n == 0 || (*digits == '0' && n > 1) || end - q < 2 || *q != '\r') return false;
  *value = v;
  p = q + 2;  // the byte after '\r' is skipped unchecked, as Redis 7.0 does
  return true;
}

}  // namespace

// The common case in one pass: a whole multibulk request of small bulks at the start of
// [data, data+len), authenticated. Its bytes are copied to storage_ at once and the arguments
// point into them. Returns the bytes it took, or 0 when the request is not of that kind, is not
// whole, or anything about it is unusual (errors, skipped counts, large bulks, limits): the
// state machine then parses it from its start, so both give the same request or error (the
// resp_parser fuzz target and resp_parser_test compare them).
size_t Parser::take_whole(const char* data, size_t len) {
  if (unauth_ || !args_.empty() || nul_blocked_) return 0;
  const char* p = data;
  const char* const end = data + len;
  int64_t count = 0;
  const size_t max_line = limits_.max_inline_len;
  if (!take_length(p, end, &count) || count <= 0 || count > limits_.max_multibulk_len ||
      static_cast<size_t>(p - data) - 2 > max_line)
    return 0;
  const bool to_allocator = static_cast<bool>(alloc_);
  std::vector<std::string_view>& argv = req_.argv_;  // into `data` until the copy below
  argv.clear();
  for (int64_t i = 0; i < count; ++i) {
    const char* const line = p;
    int64_t n = 0;
    if (p == end || *p != '$' || !take_length(p, end, &n) || n > limits_.max_bulk_len ||
        static_cast<size_t>(p - line) - 2 > max_line ||
        (to_allocator && static_cast<size_t>(n) >= large_threshold_) ||
        static_cast<size_t>(end - p) < static_cast<size_t>(n) + 2) {
      argv.clear();
      return 0;
    }
    argv.emplace_back(p, static_cast<size_t>(n));
    p += n + 2;  // the two bytes after the body are skipped unchecked, as Redis 7.0 does
  }
  const size_t used = static_cast<size_t>(p - data);
  storage_.assign(data, used);
  for (std::string_view& a : argv) a = {storage_.data() + (a.data() - data), a.size()};
  req_.owners_.resize(argv.size());
  req_.inline_ = false;
  done_ = true;
  return used;
}

// Inline lines end at '\n' (a '\r' before it is dropped); length lines end at the first '\r',
// and the byte after it is skipped unchecked, as Redis does.
namespace {

// Whether `n` bytes at `p` hold a NUL. Most lines are a length ("*3", "$5"): a loop over a few
// bytes costs less than a call of memchr.
inline bool has_nul(const char* p, size_t n) {
  if (n > 16) return std::memchr(p, '\0', n) != nullptr;
  for (size_t i = 0; i < n; ++i)
    if (p[i] == '\0') return true;
  return false;
}

}  // namespace

Parser::Line Parser::take_line(const char*& p, const char* end, std::string_view* line) {
  const bool is_inline = state_ == State::kInline;
  if (!is_inline && cr_pending_) {
    cr_pending_ = false;
    ++p;
    *line = line_;
    return Line::kDone;
  }
  const size_t avail = static_cast<size_t>(end - p);
  if (nul_blocked_) {  // see below: only the length limit can end this line
    if (nul_blocked_len_ + avail > limits_.max_inline_len) return Line::kTooBig;
    nul_blocked_len_ += avail;
    p = end;
    return Line::kPartial;
  }
  const char* eol = static_cast<const char*>(std::memchr(p, is_inline ? '\n' : '\r', avail));
  const size_t n = eol ? static_cast<size_t>(eol - p) : avail;
  if (has_nul(p, n)) {
    // Redis 7.0 looks for a line's end with strchr(), which stops at a NUL byte: a line with a
    // NUL before its end never ends. Every byte after it waits, uncounted as a request, until
    // more than max_inline_len bytes wait; then the line is too big. The bytes are not kept.
    nul_blocked_ = true;
    nul_blocked_len_ = line_.size();
    line_.clear();
    return take_line(p, end, line);
  }
  if (line_.size() + n > limits_.max_inline_len) return Line::kTooBig;
  if (!eol || (!is_inline && eol + 1 == end)) {  // a length line also needs the byte after '\r'
    line_.append(p, n);
    cr_pending_ = eol != nullptr;
    p = end;
    return Line::kPartial;
  }
  if (line_.empty()) {
    *line = std::string_view(p, n);  // fast path: the line is in the caller's buffer
  } else {
    line_.append(p, n);
    *line = line_;
  }
  p = eol + (is_inline ? 1 : 2);
  if (is_inline && !line->empty() && line->back() == '\r') line->remove_suffix(1);
  return Line::kDone;
}

bool Parser::on_line(std::string_view line, Status* status) {
  if (state_ == State::kArrayLen) return on_array_len(line, status);
  if (state_ == State::kBulkLen) return on_bulk_len(line, status);
  // Inline command.
  const bool ok = split_args(line, &storage_, [this](size_t off, size_t len) {
    args_.push_back(Arg{off, len, -1});
  });
  if (!ok) {
    fail(kErrUnbalanced, status);
    return false;
  }
  if (args_.empty()) {  // empty line: skipped
    state_ = State::kStart;
    return false;
  }
  finish_request(true);
  *status = Status::kRequest;
  return true;
}

bool Parser::on_array_len(std::string_view line, Status* status) {
  int64_t n = 0;
  if (!parse_ll(line.substr(1), &n) || n > limits_.max_multibulk_len) {
    fail(kErrInvalidMbulk, status);
  } else if (unauth_ && n > static_cast<int64_t>(limits_.unauth_max_multibulk_len)) {
    fail(kErrUnauthMbulk, status);
  } else if (n <= 0) {
    state_ = State::kStart;  // skipped, as Redis does
  } else {
    args_left_ = n;
    args_.reserve(static_cast<size_t>(std::min<int64_t>(n, 1024)));
    state_ = State::kBulkLen;
  }
  return false;
}

bool Parser::on_bulk_len(std::string_view line, Status* status) {
  const char c = line.empty() ? '\r' : line[0];
  if (c != '$') {
    std::string text = "ERR Protocol error: expected '$', got ' '";
    if (c != '\r' && c != '\n') text[text.size() - 2] = c;  // Redis turns CR/LF into spaces
    fail(std::move(text), status);
    return false;
  }
  int64_t n = 0;
  if (!parse_ll(line.substr(1), &n) || n < 0) {
    fail(kErrInvalidBulk, status);
    return false;
  }
  if (n > limits_.max_bulk_len) {
    // Redis's text, then what was asked and the limit, so that a client sending a value too
    // large learns why (Redis says only "invalid bulk length").
    fail(std::string(kErrInvalidBulk) + " " + std::to_string(n) + " (proto-max-bulk-len is " +
             std::to_string(limits_.max_bulk_len) + ")",
         status);
    return false;
  }
  if (unauth_ && n > limits_.unauth_max_bulk_len) {
    fail(kErrUnauthBulk, status);
    return false;
  }
  bulk_len_ = n;
  bulk_have_ = 0;
  crlf_have_ = 0;
  const size_t len = static_cast<size_t>(n);
  if (alloc_ && len >= large_threshold_) {
    LargeBulk lb = alloc_(len);
    if (lb.data != nullptr) {
      args_.push_back(Arg{0, len, static_cast<int64_t>(large_.size())});
      large_.push_back(std::move(lb));
      large_reserved_ += len;
      state_ = len == 0 ? State::kBulkCrlf : State::kLargeBody;
      return false;
    }
    if (lb.discard) {
      args_.push_back(Arg{storage_.size(), 0, -1});
      state_ = len == 0 ? State::kBulkCrlf : State::kDiscardBody;
      return false;
    }
  }
  args_.push_back(Arg{storage_.size(), len, -1});
  state_ = len == 0 ? State::kBulkCrlf : State::kBulkBody;
  return false;
}

// The current bulk and the bytes after it are complete. True when the request is.
bool Parser::end_bulk() {
  crlf_have_ = 0;
  if (--args_left_ > 0) {
    state_ = State::kBulkLen;
    return false;
  }
  finish_request(false);
  return true;
}

void Parser::finish_request(bool inline_cmd) {
  req_.argv_.clear();
  req_.owners_.clear();
  req_.argv_.reserve(args_.size());
  req_.owners_.resize(args_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    const Arg& a = args_[i];
    if (a.large < 0) {
      req_.argv_.emplace_back(storage_.data() + a.off, a.len);
    } else {
      LargeBulk& lb = large_[static_cast<size_t>(a.large)];
      req_.argv_.emplace_back(lb.data, a.len);
      req_.owners_[i] = std::move(lb.owner);
    }
  }
  req_.inline_ = inline_cmd;
  state_ = State::kStart;
  done_ = true;
}

void Parser::clear_request() {
  if (storage_.capacity() > kKeepCapacity) {
    std::string().swap(storage_);
  } else {
    storage_.clear();
  }
  args_.clear();
  large_.clear();
  large_reserved_ = 0;
  req_.argv_.clear();
  req_.owners_.clear();
  req_.inline_ = false;
  done_ = false;
}

void Parser::fail(std::string text, Status* status) {
  clear_request();
  line_.clear();
  cr_pending_ = false;
  nul_blocked_ = false;
  nul_blocked_len_ = 0;
  error_ = std::move(text);
  state_ = State::kError;
  *status = Status::kError;
}

size_t Parser::partial_request(std::vector<std::string_view>* args) const {
  if (state_ == State::kStart || state_ == State::kInline || state_ == State::kArrayLen ||
      state_ == State::kError || done_)
    return 0;
  // Each completed bulk took one from args_left_; the one being read (if any) has not yet, and
  // is the last of args_.
  const size_t complete = args_.size() - (state_ != State::kBulkLen ? 1 : 0);
  for (size_t i = 0; i < complete; ++i) {
    const Arg& a = args_[i];
    if (a.large < 0) args->emplace_back(storage_.data() + a.off, a.len);
    else args->emplace_back(large_[static_cast<size_t>(a.large)].data, a.len);
  }
  return complete + static_cast<size_t>(args_left_);
}

std::span<char> Parser::large_bulk_window() {
  if (state_ != State::kLargeBody) return {};
  return {large_.back().data + bulk_have_, static_cast<size_t>(bulk_len_ - bulk_have_)};
}

void Parser::commit_large_bulk(size_t n) {
  if (state_ != State::kLargeBody) return;
  bulk_have_ += static_cast<int64_t>(std::min(n, static_cast<size_t>(bulk_len_ - bulk_have_)));
  if (bulk_have_ == bulk_len_) state_ = State::kBulkCrlf;
}

size_t Parser::reserved_bytes() const {
  // A request already returned by feed() is the caller's, not a partial one.
  if (done_) return line_.size();
  return line_.size() + storage_.size() + large_reserved_;
}

size_t Parser::allocated_bytes() const {
  // libstdc++ keeps up to 15 bytes in the string object itself.
  auto heap = [](const std::string& str) { return str.capacity() > 15 ? str.capacity() : 0; };
  return heap(line_) + heap(storage_) + args_.capacity() * sizeof(Arg) +
         large_.capacity() * sizeof(LargeBulk) + req_.argv_.capacity() * sizeof(std::string_view) +
         req_.owners_.capacity() * sizeof(Keepalive);
}

void Parser::shrink() {
  if (done_) return;
  line_.shrink_to_fit();
  storage_.shrink_to_fit();  // arguments are offsets into it: moving it invalidates nothing
  args_.shrink_to_fit();
  large_.shrink_to_fit();
  req_.argv_.shrink_to_fit();
  req_.owners_.shrink_to_fit();
}

void Parser::reset() {
  clear_request();
  line_.clear();
  cr_pending_ = false;
  nul_blocked_ = false;
  nul_blocked_len_ = 0;
  error_.clear();
  args_left_ = bulk_len_ = bulk_have_ = 0;
  crlf_have_ = 0;
  state_ = State::kStart;
}

}  // namespace resp
