// resp/parser.h - incremental RESP2 request parser (multibulk and inline commands).
//
// A small state machine in the style of Dragonfly's resp_srv_parser: feed() consumes what it
// can and says whether a whole request is ready, more input is needed, or the input is a
// protocol error. It never blocks and never sees a socket. Large bulk arguments are read into
// a buffer obtained from a caller-supplied allocator (the value's final home), and the parser
// exposes the part of that buffer still to be filled, so the connection can read the socket
// straight into it: a large value is copied once.
//
// Limits and error texts follow Redis 7.0 (networking.c processInlineBuffer /
// processMultibulkBuffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "resp/keepalive.h"

namespace resp {

/// Limits enforced while parsing. Defaults are Redis 7's.
struct ParserLimits {
  int64_t max_bulk_len = 512ll * 1024 * 1024;  ///< proto-max-bulk-len, bytes
  int64_t max_multibulk_len = INT32_MAX;       ///< array length of one request
  size_t max_inline_len = 64 * 1024;           ///< inline request / length line, bytes
  size_t unauth_max_multibulk_len = 10;        ///< before AUTH when a password is set
  int64_t unauth_max_bulk_len = 16 * 1024;     ///< before AUTH when a password is set, bytes
};

/// Destination buffer for one large bulk argument. `owner` keeps `data` alive; the request
/// holds it until the parser's next feed()/reset(), so the command layer can take its own
/// reference and adopt the buffer as a value.
struct LargeBulk {
  char* data = nullptr;  ///< at least the requested number of bytes; null = failure
  Keepalive owner;       ///< one reference to what owns `data`
  /// With `data` null: the bulk's bytes are dropped as they arrive (neither allocated nor
  /// copied), and the argument reads as empty. For a request its caller will refuse whatever
  /// it holds (e.g. a key another node serves: the reply is a redirect).
  bool discard = false;
};

/// Allocates the home of a large bulk argument of `len` bytes. Called on the parsing thread,
/// from inside Parser::feed(); it may look at Parser::partial_request().
using BulkAllocator = std::function<LargeBulk(size_t len)>;

/// One parsed request. Argument views stay valid until the parser's next feed()/reset().
class Request {
 public:
  Request() = default;
  /// A request of `argv` with no large-bulk owners (e.g. a command queued by MULTI, whose
  /// arguments the caller keeps alive).
  explicit Request(std::vector<std::string_view> argv)
      : argv_(std::move(argv)), owners_(argv_.size()) {}
  size_t size() const { return argv_.size(); }
  bool empty() const { return argv_.empty(); }
  std::string_view operator[](size_t i) const { return argv_[i]; }
  const std::vector<std::string_view>& args() const { return argv_; }
  /// Owner of argument i when it was read into a LargeBulk; empty for small arguments. Held
  /// until the parser's next feed()/reset(); a caller that keeps the buffer takes a reference
  /// of its own (it knows the owner's type: it made it in its BulkAllocator).
  const Keepalive& owner(size_t i) const { return owners_[i]; }
  /// True when the request came as an inline (telnet-style) command.
  bool inline_command() const { return inline_; }

 private:
  friend class Parser;
  std::vector<std::string_view> argv_;
  std::vector<Keepalive> owners_;
  bool inline_ = false;
};

/// Incremental RESP2 request parser. One per connection; not thread-safe.
class Parser {
 public:
  enum class Status {
    kNeedMore,  ///< all input consumed, no complete request yet
    kRequest,   ///< request() holds a complete request
    kError,     ///< protocol error; error() is Redis's text; the connection must reply and close
  };

  /// `large_bulk_threshold`: bulks of at least this many bytes go to `alloc`; smaller ones are
  /// copied into the request's own storage. Without an allocator every bulk is copied; when the
  /// allocator fails (null data) the bulk is copied too and its owner() is empty.
  explicit Parser(ParserLimits limits = {}, BulkAllocator alloc = {},
                  size_t large_bulk_threshold = 16 * 1024);

  /// Consumes bytes of [data, data+len). Stops right after a complete request (kRequest), at
  /// the end of input (kNeedMore) or at an error (kError). Returns the number of bytes consumed;
  /// unconsumed bytes must be fed again (after handling the request). Bytes of a line that is
  /// not yet complete are consumed and kept by the parser. Empty inline lines and multibulk
  /// counts <= 0 are skipped. As in Redis 7.0, a length line ends at its first '\r' and the
  /// byte after it, like the two bytes after a bulk's body, is skipped without being checked.
  /// A line longer than max_inline_len (counting everything before its '\n', or before the
  /// '\r' of a length line) is an error whether or not its end has arrived. As in Redis 7.0
  /// (which looks for the end with strchr), a NUL byte before a line's end hides that end: the
  /// line and every byte after it wait, consumed but not kept, until more than max_inline_len
  /// bytes have come, and then the line is too big. After kError every feed() returns kError,
  /// consuming nothing, until reset().
  size_t feed(const char* data, size_t len, Status* status);

  /// The complete request after feed() returned kRequest.
  const Request& request() const { return req_; }

  /// The request being parsed (e.g. asked from the BulkAllocator, before a large bulk): appends
  /// its complete arguments so far to `*args` (views valid until the parser goes on) and
  /// returns its argument count as announced (the multibulk length; 0 when no multibulk is
  /// being parsed).
  size_t partial_request(std::vector<std::string_view>* args) const;

  /// The error text (without the leading '-') after feed() returned kError, e.g.
  /// "ERR Protocol error: invalid bulk length".
  const std::string& error() const { return error_; }

  /// While inside the body of a large bulk: the part of its buffer still to be filled (never
  /// including the trailing CRLF). Empty otherwise. The caller may write socket bytes into it
  /// directly and then call commit_large_bulk().
  std::span<char> large_bulk_window();

  /// Records that `n` bytes (<= large_bulk_window().size()) were written into the window.
  void commit_large_bulk(size_t n);

  /// Bytes held for the request being parsed (not one already returned): copied arguments,
  /// partial lines and the full size of large bulk buffers already allocated. Compare with
  /// client-query-buffer-limit.
  size_t reserved_bytes() const;
  /// The part of reserved_bytes() in blocks of large bulks (allocated by the BulkAllocator) of
  /// the request being parsed.
  size_t reserved_bulk_bytes() const { return done_ ? 0 : large_reserved_; }
  /// Heap bytes the parser holds for the request being parsed: partial lines and copied
  /// arguments (a bulk the BulkAllocator could not take is staged here), as allocated.
  size_t heap_bytes() const {
    return line_.size() + (done_ || storage_.empty() ? 0 : storage_.capacity());
  }
  /// Frees the buffers of the request the last feed() returned, before the next feed() would;
  /// its arguments become invalid.
  void release_request() {
    if (done_) clear_request();
  }

  /// Before AUTH when a password is set: stricter limits on argument count and bulk length.
  void set_unauthenticated(bool unauth) { unauth_ = unauth; }

  /// Drops any partial request and its buffers.
  void reset();

  /// Heap bytes the parser keeps allocated (capacity of its line, argument storage and
  /// argument vectors), used or not: what a client's query buffer costs in CLIENT LIST.
  size_t allocated_bytes() const;
  /// Gives back the capacity a large request left behind (the partial request, if any, is
  /// kept, moved into buffers of its size). Does nothing while a request returned by feed()
  /// is held (its argument views point into the storage): call after release_request().
  void shrink();

  ParserLimits& limits() { return limits_; }

 private:
  enum class State : uint8_t {
    kStart, kInline, kArrayLen, kBulkLen, kBulkBody, kLargeBody, kDiscardBody, kBulkCrlf,
    kError
  };
  enum class Line : uint8_t { kPartial, kDone, kTooBig };
  struct Arg {
    size_t off;     // offset in storage_ (small) or 0 (large)
    size_t len;
    int64_t large;  // index into large_, or -1 for a small argument
  };

  size_t take_whole(const char* data, size_t len);
  Line take_line(const char*& p, const char* end, std::string_view* line);
  bool on_line(std::string_view line, Status* status);
  bool on_array_len(std::string_view line, Status* status);
  bool on_bulk_len(std::string_view line, Status* status);
  bool end_bulk();
  void finish_request(bool inline_cmd);
  void clear_request();
  void fail(std::string text, Status* status);

  ParserLimits limits_;
  BulkAllocator alloc_;
  size_t large_threshold_;
  bool unauth_ = false;

  State state_ = State::kStart;
  bool cr_pending_ = false;      // a length line's '\r' was seen, the byte after it was not
  bool nul_blocked_ = false;     // the current line has a NUL before its end: it never ends
  size_t nul_blocked_len_ = 0;   // bytes of that line received (not kept)
  bool done_ = false;            // req_ holds a request returned by the last feed()
  std::string line_;             // partial line carried across feeds
  int64_t args_left_ = 0;        // bulks still expected in the current multibulk
  int64_t bulk_len_ = 0;         // current bulk's length
  int64_t bulk_have_ = 0;        // bytes of the current bulk received
  size_t crlf_have_ = 0;         // bytes after the bulk (its "CRLF") received

  std::string storage_;          // small arguments, back to back (capacity reused)
  std::vector<Arg> args_;        // arguments of the request being parsed
  std::vector<LargeBulk> large_; // large arguments' buffers
  size_t large_reserved_ = 0;    // sum of the allocated sizes in large_

  Request req_;
  std::string error_;
};

/// Splits an inline command line into arguments with Redis's quoting rules (sdssplitargs:
/// "double quotes" with \n \r \t \b \a \\ \" \xHH escapes, 'single quotes' with \' only).
/// Returns false on unbalanced quotes, or a closing quote followed by something other than a
/// space. Like the C original, the line ends at its first NUL byte.
bool split_inline_args(std::string_view line, std::vector<std::string>* out);

}  // namespace resp
