// resp_transport.cc - payloads in the RESP socket: SET and GET, pipelined for batches.
//
// hiredis would copy a payload twice on the way in (format, then reader buffer and reply
// object), so payload commands are written with writev straight from the caller's pieces and
// their replies are read straight into the caller's pieces (Session::read_exact). Control
// commands stay on hiredis; the two never interleave (Session::idle).
//
// An `asking` transport (a key a cluster node named in -ASK) sends ASKING before each command
// and reads its +OK before the command's reply.
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "session.h"
#include "transport.h"

namespace stratakv::detail {

namespace {

constexpr size_t kGetPipeline = 128;  // GETs in flight at once (bounds the server's output)
constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";

void bulk(std::string& out, std::string_view s) {
  out += '$';
  out += std::to_string(s.size());
  out += "\r\n";
  out += s;
  out += "\r\n";
}

iovec io(const void* p, size_t n) { return {const_cast<void*>(p), n}; }

class RespTransport final : public Transport {
 public:
  RespTransport(Session& s, bool asking) : s_(s), asking_(asking) {}
  std::string_view name() const override { return "resp"; }

  void put(std::span<const PutItem> items, const PutOptions& o, std::span<Result> out) override {
    std::string tail = "\r\n";  // ends the value; then the options
    int argc = 3;
    if (o.ttl_ms > 0) {
      bulk(tail, "PX");
      bulk(tail, std::to_string(o.ttl_ms));
      argc += 2;
    }
    if (o.nx) {
      bulk(tail, "NX");
      argc += 1;
    }
    std::vector<std::string> heads(items.size());
    std::vector<iovec> iov;
    for (size_t i = 0; i < items.size(); ++i) {
      std::string& h = heads[i];
      if (asking_) h = kAsking;
      h += "*" + std::to_string(argc) + "\r\n$3\r\nSET\r\n";
      bulk(h, items[i].key);
      h += "$" + std::to_string(items[i].total) + "\r\n";
      iov.push_back(io(h.data(), h.size()));
      for (ConstBytes p : items[i].pieces)
        if (!p.empty()) iov.push_back(io(p.data(), p.size()));
      iov.push_back(io(tail.data(), tail.size()));
    }
    start();
    s_.write_all(iov);
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string asked = read_asking();
      const std::string line = s_.read_line();
      if (!asked.empty()) out[i] = {Result::Status::kError, 0, asked};
      else if (line == "+OK") out[i] = {Result::Status::kOk, items[i].total, {}};
      else if (line == "$-1" || line == "_") out[i] = {Result::Status::kMiss, 0, {}};
      else if (line[0] == '-') out[i] = {Result::Status::kError, 0, line.substr(1)};
      else s_.protocol_fail("unexpected reply to SET: " + line.substr(0, 64));
    }
  }

  void get_into(std::span<const GetItem> items, std::span<Result> out) override {
    for (size_t at = 0; at < items.size(); at += kGetPipeline) {
      const size_t n = std::min(kGetPipeline, items.size() - at);
      send_gets(items.subspan(at, n));
      for (size_t i = at; i < at + n; ++i) out[i] = read_get(items[i]);
    }
  }

  std::optional<size_t> get_with(std::string_view key, const Allocator& alloc) override {
    GetItem item{key};
    send_gets({&item, 1});
    const std::string asked = read_asking();
    const std::string line = s_.read_line();
    if (!asked.empty() && line[0] != '-') {  // drain the value, then report ASKING's error
      const int64_t len = bulk_length(line);
      if (len >= 0) s_.skip(static_cast<size_t>(len)), s_.read_crlf();
      throw Error(Error::Kind::kServer, asked);
    }
    if (line[0] == '-') throw Error(Error::Kind::kServer, line.substr(1));
    const int64_t len = bulk_length(line);
    if (len < 0) return std::nullopt;
    const size_t n = static_cast<size_t>(len);
    MutableBytes dst = alloc(n);
    if (dst.size() < n) s_.fail("the allocator gave fewer bytes than the value's length");
    s_.read_exact(dst.first(n));
    s_.read_crlf();
    return n;
  }

 private:
  void start() {
    if (!s_.idle()) s_.protocol_fail("unread reply bytes before a command");
  }

  // The reply to ASKING (asking_ only): "" when +OK, else its error text.
  std::string read_asking() {
    if (!asking_) return {};
    const std::string line = s_.read_line();
    if (line == "+OK") return {};
    if (line[0] == '-') return line.substr(1);
    s_.protocol_fail("unexpected reply to ASKING: " + line.substr(0, 64));
  }

  void send_gets(std::span<const GetItem> items) {
    std::string cmds;
    for (const GetItem& it : items) {
      if (asking_) cmds += kAsking;
      cmds += "*2\r\n$3\r\nGET\r\n";
      bulk(cmds, it.key);
    }
    start();
    iovec v = io(cmds.data(), cmds.size());
    s_.write_all({&v, 1});
  }

  // "$<n>" -> n, "$-1" or "_" -> -1; anything else is a protocol error.
  int64_t bulk_length(const std::string& line) {
    if (line == "_") return -1;
    int64_t n = 0;
    auto [end, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), n);
    if (line[0] != '$' || ec != std::errc{} || end != line.data() + line.size() || n < -1)
      s_.protocol_fail("unexpected reply to GET: " + line.substr(0, 64));
    return n;
  }

  Result read_get(const GetItem& item) {
    const std::string asked = read_asking();
    const std::string line = s_.read_line();
    if (line[0] == '-') return {Result::Status::kError, 0, line.substr(1)};
    const int64_t len = bulk_length(line);
    if (len < 0) return {Result::Status::kMiss, 0, {}};
    const uint64_t n = static_cast<uint64_t>(len);
    if (n > item.window || !asked.empty()) {  // as the fast path: an error, nothing written
      s_.skip(n);
      s_.read_crlf();
      return {Result::Status::kError, 0, asked.empty() ? window_error(item.window, n) : asked};
    }
    uint64_t left = n;
    for (MutableBytes p : item.pieces) {
      if (left == 0) break;
      const size_t step = static_cast<size_t>(std::min<uint64_t>(left, p.size()));
      s_.read_exact(p.first(step));
      left -= step;
    }
    s_.read_crlf();
    return {Result::Status::kOk, n, {}};
  }

  Session& s_;
  const bool asking_;
};

}  // namespace

std::unique_ptr<Transport> make_resp_transport(Session& s, bool asking) {
  return std::make_unique<RespTransport>(s, asking);
}

}  // namespace stratakv::detail
