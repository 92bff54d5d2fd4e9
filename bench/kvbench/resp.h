// bench/kvbench/resp.h - the little of RESP2 stratakv-bench speaks: encoding commands, and
// reading the head of a reply (payloads are read by the caller, into its own memory).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "net.h"

namespace kvbench {

/// Appends a command of `argc` arguments to `out` incrementally: begin(argc), then argc args.
class CommandWriter {
 public:
  explicit CommandWriter(std::string& out) : out_(out) {}
  CommandWriter& begin(size_t argc);
  CommandWriter& arg(std::string_view a);
  CommandWriter& arg(uint64_t n);
  /// The header of a bulk argument of n bytes whose bytes the caller sends itself, followed
  /// by "\r\n" (e.g. the value of a SET, from a writev).
  CommandWriter& bulk_header(uint64_t n);

 private:
  std::string& out_;
};

/// Appends a whole command.
void append_command(std::string& out, std::initializer_list<std::string_view> args);

/// The head of one reply.
struct ReplyHead {
  char type = 0;          ///< '+', '-', ':', '$' (bulk), '*' (array)
  int64_t n = 0;          ///< ':' the integer; '$' the length (-1 nil); '*' the count (-1 nil)
  std::string_view text;  ///< '+' / '-' the line after the type byte (valid until next read)
  bool nil() const { return (type == '$' || type == '*') && n < 0; }
};

/// Reads the head of the next reply. Throws IoError on a malformed line.
ReplyHead read_head(Conn& c);
/// Reads the rest of a reply whose head was read (bulk payload, array elements) and drops it.
void skip_body(Conn& c, const ReplyHead& h);
/// Reads "\r\n" after a bulk payload.
void expect_crlf(Conn& c);
/// A whole reply as text (for control commands: INFO, CONFIG GET); arrays are joined with
/// '\n'; an error reply yields "-ERR ..." ; nil yields "".
std::string read_reply_text(Conn& c);

}  // namespace kvbench
