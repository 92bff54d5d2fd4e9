// bench/kvbench/resp.cc - RESP2 command encoding and reply heads.
#include "resp.h"

#include <charconv>

namespace kvbench {

CommandWriter& CommandWriter::begin(size_t argc) {
  out_ += '*';
  out_ += std::to_string(argc);
  out_ += "\r\n";
  return *this;
}

CommandWriter& CommandWriter::arg(std::string_view a) {
  bulk_header(a.size());
  out_.append(a.data(), a.size());
  out_ += "\r\n";
  return *this;
}

CommandWriter& CommandWriter::arg(uint64_t n) {
  char b[24];
  auto [p, ec] = std::to_chars(b, b + sizeof b, n);
  return arg(std::string_view(b, static_cast<size_t>(p - b)));
}

CommandWriter& CommandWriter::bulk_header(uint64_t n) {
  out_ += '$';
  out_ += std::to_string(n);
  out_ += "\r\n";
  return *this;
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  CommandWriter w(out);
  w.begin(args.size());
  for (auto a : args) w.arg(a);
}

ReplyHead read_head(Conn& c) {
  std::string_view l = c.line();
  if (l.empty()) throw IoError("protocol error: empty reply line");
  ReplyHead h;
  h.type = l[0];
  switch (h.type) {
    case '+':
    case '-':
      h.text = l.substr(1);
      return h;
    case ':':
    case '$':
    case '*': {
      auto [p, ec] = std::from_chars(l.data() + 1, l.data() + l.size(), h.n);
      if (ec != std::errc() || p != l.data() + l.size())
        throw IoError("protocol error: bad reply line: " + std::string(l.substr(0, 80)));
      return h;
    }
    default:
      throw IoError("protocol error: unexpected reply: " + std::string(l.substr(0, 80)));
  }
}

void expect_crlf(Conn& c) {
  char crlf[2];
  c.read_exact(crlf, 2);
  if (crlf[0] != '\r' || crlf[1] != '\n') throw IoError("protocol error: bulk not terminated by CRLF");
}

void skip_body(Conn& c, const ReplyHead& h) {
  if (h.type == '$' && h.n >= 0) {
    c.skip(static_cast<size_t>(h.n));
    expect_crlf(c);
  } else if (h.type == '*') {
    for (int64_t i = 0; i < h.n; ++i) skip_body(c, read_head(c));
  }
}

std::string read_reply_text(Conn& c) {
  const ReplyHead h = read_head(c);
  switch (h.type) {
    case '+': return std::string(h.text);
    case '-': return "-" + std::string(h.text);
    case ':': return std::to_string(h.n);
    case '$': {
      if (h.n < 0) return "";
      std::string s(static_cast<size_t>(h.n), '\0');
      c.read_exact(s.data(), s.size());
      expect_crlf(c);
      return s;
    }
    default: {
      std::string s;
      for (int64_t i = 0; i < h.n; ++i) {
        if (i) s += '\n';
        s += read_reply_text(c);
      }
      return s;
    }
  }
}

}  // namespace kvbench
