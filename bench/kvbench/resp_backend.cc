// bench/kvbench/resp_backend.cc - the resp backend: pipelined EXISTS / GET / SET on one
// connection, raw sockets (see backend.h). GET payloads are received straight into the load
// slots; SET payloads are sent from the store slots with writev.
#include <sys/mman.h>

#include <cstring>

#include "backend.h"
#include "net.h"
#include "resp.h"

namespace kvbench {
namespace {

class RespBackend : public Backend {
 public:
  RespBackend(const Options& o, size_t slots, size_t value_bytes)
      : Backend(slots, value_bytes),
        conn_(o.unix_path.empty() ? Conn::tcp(o.host, o.port) : Conn::unix_socket(o.unix_path)) {
    map_bytes_ = 2 * slots * value_bytes;
    void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw IoError("mmap of " + std::to_string(map_bytes_) + " bytes failed");
    std::memset(p, 0, map_bytes_);  // fault the pages in before any timing
    load_base_ = static_cast<std::byte*>(p);
    store_base_ = load_base_ + slots * value_bytes;
    if (!o.password.empty()) {
      std::string cmd;
      append_command(cmd, {"AUTH", o.password});
      conn_.send_all(cmd);
      std::string r = read_reply_text(conn_);
      if (r != "OK") throw IoError("AUTH: " + r);
    }
  }
  ~RespBackend() override { ::munmap(load_base_, map_bytes_); }

  const char* name() const override { return "resp"; }

  size_t lookup(std::span<const std::string> keys) override {
    cmd_.clear();
    for (const auto& k : keys) append_command(cmd_, {"EXISTS", k});
    conn_.send_all(cmd_);
    size_t prefix = 0;
    bool broken = false;
    for (size_t i = 0; i < keys.size(); ++i) {
      const ReplyHead h = read_head(conn_);
      if (h.type != ':') {
        skip_body(conn_, h);
        broken = true;  // an error reply counts as absent
        continue;
      }
      if (h.n > 0 && !broken) ++prefix;
      else broken = true;
    }
    return prefix;
  }

  void load(std::span<const std::string> keys, std::vector<KeyResult>& results) override {
    cmd_.clear();
    for (const auto& k : keys) append_command(cmd_, {"GET", k});
    conn_.send_all(cmd_);
    results.assign(keys.size(), {});
    for (size_t i = 0; i < keys.size(); ++i) {
      KeyResult& r = results[i];
      const ReplyHead h = read_head(conn_);
      if (h.type == '-') {
        r.status = KeyResult::Status::kError;
        r.error = std::string(h.text);
      } else if (h.type != '$') {
        skip_body(conn_, h);
        r.status = KeyResult::Status::kError;
        r.error = std::string("unexpected reply type ") + h.type;
      } else if (h.n < 0) {
        r.status = KeyResult::Status::kMiss;
      } else if (static_cast<uint64_t>(h.n) != value_bytes_) {
        skip_body(conn_, h);
        r.status = KeyResult::Status::kWrongLength;
        r.length = static_cast<uint64_t>(h.n);
      } else {
        conn_.read_exact(load_slot(i), value_bytes_);
        expect_crlf(conn_);
        r.length = value_bytes_;
      }
    }
  }

  void store(std::span<const std::string> keys, std::vector<KeyResult>& results) override {
    static const char kCrlf[] = "\r\n";
    heads_.resize(keys.size());
    iov_.resize(3 * keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string& h = heads_[i];
      h.clear();
      CommandWriter(h).begin(3).arg("SET").arg(keys[i]).bulk_header(value_bytes_);
      iov_[3 * i] = {h.data(), h.size()};
      iov_[3 * i + 1] = {store_slot(i), value_bytes_};
      iov_[3 * i + 2] = {const_cast<char*>(kCrlf), 2};
    }
    conn_.writev_all(iov_.data(), iov_.size());
    results.assign(keys.size(), {});
    for (size_t i = 0; i < keys.size(); ++i) {
      KeyResult& r = results[i];
      const ReplyHead h = read_head(conn_);
      if (h.type == '+') {
        r.length = value_bytes_;
        continue;
      }
      skip_body(conn_, h);
      r.status = KeyResult::Status::kError;
      r.error = h.type == '-' ? std::string(h.text) : std::string("unexpected reply type ") + h.type;
    }
  }

 private:
  Conn conn_;
  size_t map_bytes_ = 0;
  std::string cmd_;
  std::vector<std::string> heads_;
  std::vector<iovec> iov_;
};

}  // namespace

std::unique_ptr<Backend> make_resp_backend(const Options& o, size_t slots, size_t value_bytes) {
  return std::make_unique<RespBackend>(o, slots, value_bytes);
}

}  // namespace kvbench
