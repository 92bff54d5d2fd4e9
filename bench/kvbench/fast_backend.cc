// bench/kvbench/fast_backend.cc - the fast backend: stratakv's shm fast path spoken directly
// (docs/fast-path.md). One Unix-socket connection per stream; the stream's load and store
// slots are one memfd segment, handed to the server once with KV.REGISTER SHM (the file
// descriptor travels with the command, SCM_RIGHTS). Lookups are KV.PREFIX (with PIN, so a hit
// is not evicted before it is loaded), loads KV.MGET and stores KV.MPUT, each naming slots of
// the segment: the server copies the bytes, once, and nothing goes through the socket.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "backend.h"
#include "net.h"
#include "resp.h"

namespace kvbench {
namespace {

class FastBackend : public Backend {
 public:
  FastBackend(const Options& o, size_t slots, size_t value_bytes)
      : Backend(slots, value_bytes),
        conn_(Conn::unix_socket(o.unix_path)),
        pin_(o.pin),
        unpin_(o.pin && o.unpin),
        pin_ms_(o.pin_ms) {
    if (!o.password.empty()) {
      std::string cmd;
      append_command(cmd, {"AUTH", o.password});
      conn_.send_all(cmd);
      if (std::string r = read_reply_text(conn_); r != "OK") throw IoError("AUTH: " + r);
    }
    seg_bytes_ = 2 * slots * value_bytes;
    fd_ = ::memfd_create("stratakv-bench", MFD_CLOEXEC);
    if (fd_ < 0) throw IoError(std::string("memfd_create: ") + std::strerror(errno));
    if (::ftruncate(fd_, static_cast<off_t>(seg_bytes_)) != 0)
      throw IoError(std::string("ftruncate: ") + std::strerror(errno));
    void* p = ::mmap(nullptr, seg_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw IoError(std::string("mmap: ") + std::strerror(errno));
    std::memset(p, 0, seg_bytes_);  // allocate the pages before any timing
    load_base_ = static_cast<std::byte*>(p);
    store_base_ = load_base_ + slots * value_bytes;
    std::string cmd;
    CommandWriter(cmd).begin(3).arg("KV.REGISTER").arg("SHM").arg(seg_bytes_);
    conn_.send_with_fd(cmd, fd_);
    const ReplyHead h = read_head(conn_);
    if (h.type != ':') throw IoError("KV.REGISTER SHM: " + std::string(h.type == '-' ? h.text : "unexpected reply"));
    segment_ = static_cast<uint64_t>(h.n);
  }

  ~FastBackend() override {
    if (load_base_) ::munmap(load_base_, seg_bytes_);
    if (fd_ >= 0) ::close(fd_);
  }

  const char* name() const override { return "fast"; }

  size_t lookup(std::span<const std::string> keys) override {
    if (keys.empty()) return 0;
    start_command();
    CommandWriter w(cmd_);
    w.begin(1 + keys.size() + (pin_ ? 2 : 0)).arg("KV.PREFIX");
    for (const auto& k : keys) w.arg(k);
    if (pin_) w.arg("PIN").arg(pin_ms_);
    send_and_drain();
    const ReplyHead h = read_head(conn_);
    if (h.type != ':') {
      skip_body(conn_, h);
      throw IoError("KV.PREFIX: " + std::string(h.type == '-' ? h.text : "unexpected reply"));
    }
    return static_cast<size_t>(h.n);
  }

  void load(std::span<const std::string> keys, std::vector<KeyResult>& results) override {
    start_command();
    CommandWriter w(cmd_);
    w.begin(2 + 5 * keys.size()).arg("KV.MGET").arg(keys.size());
    for (size_t i = 0; i < keys.size(); ++i)
      w.arg(keys[i]).arg(1).arg(segment_).arg(offset_of(load_slot(i))).arg(value_bytes_);
    send_and_drain();
    read_array(keys.size(), "KV.MGET", results, [&](const ReplyHead& h, KeyResult& r) {
      if (h.type != ':') return false;
      r.length = static_cast<uint64_t>(h.n);
      if (r.length != value_bytes_) r.status = KeyResult::Status::kWrongLength;
      return true;
    });
  }

  void store(std::span<const std::string> keys, std::vector<KeyResult>& results) override {
    start_command();
    CommandWriter w(cmd_);
    w.begin(2 + 6 * keys.size()).arg("KV.MPUT").arg(keys.size());
    for (size_t i = 0; i < keys.size(); ++i)
      w.arg(keys[i]).arg(value_bytes_).arg(1).arg(segment_).arg(offset_of(store_slot(i))).arg(value_bytes_);
    send_and_drain();
    read_array(keys.size(), "KV.MPUT", results, [&](const ReplyHead& h, KeyResult& r) {
      if (h.type != '+') return false;
      r.length = value_bytes_;
      return true;
    });
  }

  void release(std::span<const std::string> keys) override {
    if (!unpin_ || keys.empty()) return;
    CommandWriter w(pending_);
    w.begin(1 + keys.size()).arg("KV.UNPIN");
    for (const auto& k : keys) w.arg(k);
    ++pending_replies_;
  }

 private:
  uint64_t offset_of(const std::byte* p) const { return static_cast<uint64_t>(p - load_base_); }

  // A new command goes after whatever is pending (KV.UNPIN), in one send.
  void start_command() {
    cmd_.swap(pending_);
    pending_.clear();
  }

  // Sends cmd_ and reads the replies of the pending commands in front of it.
  void send_and_drain() {
    conn_.send_all(cmd_);
    for (; pending_replies_ > 0; --pending_replies_) skip_body(conn_, read_head(conn_));
  }

  // Reads an array reply of `n` per-key results; `ok(head, result)` accepts a success head.
  template <class Ok>
  void read_array(size_t n, const char* what, std::vector<KeyResult>& results, Ok ok) {
    results.assign(n, {});
    const ReplyHead top = read_head(conn_);
    if (top.type != '*' || top.n != static_cast<int64_t>(n)) {
      const std::string text = top.type == '-' ? std::string(top.text) : "unexpected reply";
      skip_body(conn_, top);
      for (auto& r : results) r = {KeyResult::Status::kError, 0, text};
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      KeyResult& r = results[i];
      const ReplyHead h = read_head(conn_);
      if (ok(h, r)) continue;
      if (h.nil()) {
        r.status = KeyResult::Status::kMiss;
      } else {
        skip_body(conn_, h);
        r.status = KeyResult::Status::kError;
        r.error = h.type == '-' ? std::string(h.text) : std::string(what) + ": unexpected reply";
      }
    }
  }

  Conn conn_;
  bool pin_;
  bool unpin_;
  uint64_t pin_ms_;
  int fd_ = -1;
  size_t seg_bytes_ = 0;
  uint64_t segment_ = 0;
  std::string cmd_, pending_;
  int pending_replies_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_fast_backend(const Options& o, size_t slots, size_t value_bytes) {
  return std::make_unique<FastBackend>(o, slots, value_bytes);
}

}  // namespace kvbench
