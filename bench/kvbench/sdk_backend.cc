// bench/kvbench/sdk_backend.cc - the fast backend through the C++ SDK (clients/cpp,
// docs/sdk.md): what an application using libstratakv gets. One stratakv::Client per stream on
// the Unix socket, forced onto the shm transport; the stream's load and store slots are one
// SDK registered buffer (Client::alloc_buffer), so stores from it and loads into it move the
// bytes once, by the server, as with the fast-raw backend (fast_backend.cc), which speaks the
// same commands directly. Lookups are prefix_match (KV.PREFIX, with a pin when --pin-ms is
// on), loads batch_get_into (KV.MGET), stores batch_put (KV.MPUT), releases unpin (KV.UNPIN).
//
// Differences from fast-raw that show in the figures: the SDK sends pinning lookups and unpins
// over a lease connection of their own (so an unpin is a round trip of its own rather than
// riding in front of the next command), and it maps the buffer to descriptors by address on
// every call.
#include <stratakv/client.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "net.h"

namespace kvbench {
namespace {

// The value length in "ERR window of N bytes is smaller than the value (M bytes)", or nullopt.
std::optional<uint64_t> window_too_small(std::string_view err) {
  constexpr std::string_view kMark = "smaller than the value (";
  const size_t at = err.find(kMark);
  if (at == std::string_view::npos) return std::nullopt;
  uint64_t n = 0;
  bool any = false;
  for (size_t i = at + kMark.size(); i < err.size() && err[i] >= '0' && err[i] <= '9'; ++i) {
    n = n * 10 + static_cast<uint64_t>(err[i] - '0');
    any = true;
  }
  return any ? std::optional<uint64_t>(n) : std::nullopt;
}

// The SDK URL of a socket path: absolute, with the characters its URL syntax reserves escaped.
std::string unix_url(const std::string& path) {
  std::string url = "unix://";
  for (const char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '@') {
      char esc[4];
      std::snprintf(esc, sizeof esc, "%%%02X", static_cast<unsigned char>(c));
      url += esc;
    } else {
      url += c;
    }
  }
  return url;
}

stratakv::Options client_options(const Options& o) {
  stratakv::Options c;
  c.max_connections = 1;  // a stream runs one call at a time
  // On a Unix socket: shm or fail. A --url (a cluster) picks per node.
  if (o.url.empty()) c.transport = stratakv::TransportKind::kShm;
  c.password = o.password;
  return c;
}

class SdkBackend : public Backend {
 public:
  SdkBackend(const Options& o, size_t slots, size_t value_bytes) try
      : Backend(slots, value_bytes),
        client_(o.url.empty() ? unix_url(o.unix_path) : o.url, client_options(o)),
        pin_(o.pin),
        unpin_(o.pin && o.unpin),
        pin_ms_(o.pin_ms) {
    buffer_ = client_.alloc_buffer(2 * slots * value_bytes);
    std::memset(buffer_.data(), 0, buffer_.size());  // allocate the pages before any timing
    load_base_ = buffer_.data();
    store_base_ = load_base_ + slots * value_bytes;
    // Connections and registration before the clock starts, as fast-raw does: a get of a key
    // that does not exist registers the buffer on the pool connection (KV.REGISTER SHM), and
    // a pinning lookup of it opens the lease connection (it finds nothing, so leases nothing).
    const std::string absent = o.key_prefix + "@kvbench-warmup";
    client_.get_into(absent, buffer_.span().first(value_bytes));
    if (pin_) {
      const std::string_view keys[] = {absent};
      client_.prefix_match(keys, pin_ms_);
    }
    loads_.reserve(slots);
    stores_.reserve(slots);
    views_.reserve(slots);
  } catch (const stratakv::Error& e) {
    throw IoError(std::string("SDK: ") + e.what());
  }

  const char* name() const override { return "fast"; }

  size_t lookup(std::span<const std::string> keys) override {
    if (keys.empty()) return 0;
    return client_.prefix_match(views(keys), pin_ ? std::optional<uint64_t>(pin_ms_) : std::nullopt);
  }

  void load(std::span<const std::string> keys, std::vector<KeyResult>& results) override {
    loads_.clear();
    for (size_t i = 0; i < keys.size(); ++i) loads_.emplace_back(load_slot(i), value_bytes_);
    convert(client_.batch_get_into(views(keys), loads_), results, true);
  }

  void store(std::span<const std::string> keys, std::vector<KeyResult>& results) override {
    stores_.clear();
    for (size_t i = 0; i < keys.size(); ++i) stores_.emplace_back(store_slot(i), value_bytes_);
    convert(client_.batch_put(views(keys), stores_), results, false);
  }

  void release(std::span<const std::string> keys) override {
    if (unpin_ && !keys.empty()) client_.unpin(views(keys));
  }

 private:
  std::span<const std::string_view> views(std::span<const std::string> keys) {
    views_.assign(keys.begin(), keys.end());
    return views_;
  }

  // SDK results to the bench's; a load of another length is kWrongLength (the bench's
  // accounting counts it as a mismatch), whether shorter (the SDK reports its length) or
  // longer (the SDK reports the server's window error, nothing written).
  void convert(const std::vector<stratakv::Result>& in, std::vector<KeyResult>& out, bool load) const {
    out.assign(in.size(), {});
    for (size_t i = 0; i < in.size(); ++i) {
      const stratakv::Result& r = in[i];
      KeyResult& k = out[i];
      switch (r.status) {
        case stratakv::Result::Status::kOk:
          k.length = r.length;
          if (load && r.length != value_bytes_) k.status = KeyResult::Status::kWrongLength;
          break;
        case stratakv::Result::Status::kMiss:
          k.status = load ? KeyResult::Status::kMiss : KeyResult::Status::kError;
          if (!load) k.error = "not stored (NX)";
          break;
        case stratakv::Result::Status::kError:
          if (auto n = load ? window_too_small(r.error) : std::nullopt) {
            k.status = KeyResult::Status::kWrongLength;
            k.length = *n;
          } else {
            k.status = KeyResult::Status::kError;
            k.error = r.error;
          }
          break;
      }
    }
  }

  stratakv::Client client_;
  stratakv::Buffer buffer_;
  bool pin_;
  bool unpin_;
  uint64_t pin_ms_;
  std::vector<stratakv::MutableBytes> loads_;
  std::vector<stratakv::ConstBytes> stores_;
  std::vector<std::string_view> views_;
};

}  // namespace

std::unique_ptr<Backend> make_sdk_backend(const Options& o, size_t slots, size_t value_bytes) {
  return std::make_unique<SdkBackend>(o, slots, value_bytes);
}

}  // namespace kvbench
