// resp/writer.h - RESP2/RESP3 reply writer with scatter-gather output.
//
// Replies accumulate in an internal byte buffer; a large bulk string is not copied but
// referenced (its bytes and a keepalive owner), so a GET of a 32 MiB value is written to the
// socket straight from the value's own memory. The connection takes the pending output as a
// list of (pointer, length) buffers, writes them, then clear()s, which drops the keepalives.
//
// Shapes follow the RESP3 spec (github.com/redis/redis-specifications, RESP3.md) and Redis 7's
// RESP2 downgrades: map -> flat array of 2n, set -> array, double -> bulk string, null -> $-1,
// boolean -> integer 1/0, verbatim -> bulk string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "resp/keepalive.h"

namespace resp {

/// A contiguous piece of pending output.
struct OutBuffer {
  const char* data;
  size_t size;
};

/// Builds replies for one connection. Not thread-safe.
class Writer {
 public:
  /// Bulk strings of at least this many bytes passed to bulk_ref() are referenced, not copied.
  static constexpr size_t kRefThreshold = 16 * 1024;

  explicit Writer(int protocol = 2) : proto_(protocol) {}

  /// 2 (RESP2, the default) or 3 (after HELLO 3).
  void set_protocol(int protocol) { proto_ = protocol; }
  int protocol() const { return proto_; }

  void simple(std::string_view s);   ///< +s (CR/LF in s become spaces)
  void ok() { simple("OK"); }        ///< +OK
  /// -text. `text` starts with the error code, e.g. "ERR syntax error"; CR/LF in it become
  /// spaces, as Redis does. Counted in errors() and passed to the error observer.
  void error(std::string_view text);
  void integer(int64_t v);           ///< :v
  void bulk(std::string_view s);     ///< $len s (copied)
  /// $len, then `s` by reference when large (kept alive by `keepalive` until clear()),
  /// otherwise copied (and `keepalive` released at once).
  void bulk_ref(std::string_view s, Keepalive keepalive);
  void null();                       ///< RESP2 $-1, RESP3 _
  void null_array();                 ///< RESP2 *-1, RESP3 _
  void array(size_t n);              ///< *n
  void map(size_t n);                ///< RESP3 %n, RESP2 *2n
  void set(size_t n);                ///< RESP3 ~n, RESP2 *n
  void push(size_t n);               ///< RESP3 >n, RESP2 *n
  void dbl(double v);                ///< RESP3 ,v  RESP2 $len v  (%.17g, inf, -inf, nan)
  void boolean(bool v);              ///< RESP3 #t/#f, RESP2 :1/:0
  /// RESP3 =len fmt:text (fmt is 3 chars, e.g. "txt"; any other size is sent as "txt"),
  /// RESP2 a bulk string of text.
  void verbatim(std::string_view fmt, std::string_view text);
  /// Appends raw, already-encoded RESP bytes.
  void raw(std::string_view bytes);
  /// raw() for bytes kept alive by `keepalive`: referenced (not copied) when large, as
  /// bulk_ref(); a message published to many subscribers is written to each from one buffer.
  void raw_ref(std::string_view bytes, Keepalive keepalive);

  /// True when nothing is pending.
  bool empty() const { return inline_.empty() && refs_.empty(); }
  /// Bytes pending in total (inline and referenced).
  size_t pending_bytes() const { return inline_.size() + ref_bytes_; }
  /// Replaces *out with the pending output, in order, as buffers valid until the next call that
  /// writes or clears.
  void buffers(std::vector<OutBuffer>* out) const;
  /// Drops pending output and releases referenced values. Call after the write completed.
  void clear();
  /// Heap bytes the writer keeps allocated for pending output (its buffer and reference list),
  /// used or not.
  size_t allocated_bytes() const {
    return (inline_.capacity() > 15 ? inline_.capacity() : 0) + refs_.capacity() * sizeof(Ref);
  }
  /// Gives back the buffers' capacity when nothing is pending (an idle client's), else does
  /// nothing.
  void shrink() {
    if (!empty()) return;
    std::string().swap(inline_);
    std::vector<Ref>().swap(refs_);
  }

  /// Error replies written since construction (error() calls; clear() keeps the count): a
  /// caller compares it before and after a command to tell whether the command replied an
  /// error (Redis's failed_calls).
  uint64_t errors() const { return errors_; }
  /// Called with the text of every error reply as it is written (e.g. to count INFO
  /// errorstats by error code); null: none. `arg` is passed back.
  using ErrorObserver = void (*)(void* arg, std::string_view text);
  void set_error_observer(ErrorObserver fn, void* arg) {
    observer_ = fn;
    observer_arg_ = arg;
  }

  /// A position in the pending output, to rewind() to. Valid until the next clear().
  struct Mark {
    size_t inline_size, refs, ref_bytes;
    uint64_t errors;
  };
  Mark mark() const { return {inline_.size(), refs_.size(), ref_bytes_, errors_}; }
  /// Drops what was written since `m` (a command that must run again: its partial reply goes),
  /// releasing the values referenced since, and sets errors() back. The error observer is not
  /// told (what it saw of the dropped part stays counted).
  void rewind(const Mark& m);

 private:
  struct Ref {
    size_t inline_offset;  // position in inline_ where the referenced bytes belong
    std::string_view bytes;
    Keepalive keepalive;
  };
  void header(char type, int64_t n);
  void line(char type, std::string_view s);  // type, s with CR/LF as spaces, CRLF

  int proto_;
  std::string inline_;
  std::vector<Ref> refs_;
  size_t ref_bytes_ = 0;
  uint64_t errors_ = 0;
  ErrorObserver observer_ = nullptr;
  void* observer_arg_ = nullptr;
};

}  // namespace resp
