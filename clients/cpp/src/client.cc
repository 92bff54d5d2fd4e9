// client.cc - stratakv::Client: each call hands its keys to the node(s) behind the Client
// (cluster_core.h): values through striping.h (which reads and writes plain values as they
// are), the rest through routed_ops.h.
#include "stratakv/client.h"

#include "cluster_core.h"
#include "routed_ops.h"
#include "striping.h"

namespace stratakv {

using detail::ClusterCore;
using detail::GetItem;
using detail::PutItem;

namespace {

template <class Pieces>
uint64_t total_of(const Pieces& pieces) {
  uint64_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

[[noreturn]] void throw_result(const Result& r) { throw Error(Error::Kind::kServer, r.error); }

std::shared_ptr<ClusterCore> make_core(std::string_view url, Options options) {
  if (detail::is_cluster_url(url))
    return std::make_shared<ClusterCore>(detail::parse_cluster_url(url), std::move(options));
  return std::make_shared<ClusterCore>(detail::parse_url(url), std::move(options));
}

}  // namespace

std::byte* Buffer::data() const noexcept { return state_ ? state_->base : nullptr; }
size_t Buffer::size() const noexcept { return state_ ? state_->size : 0; }
bool Buffer::zero_copy() const noexcept { return state_ && state_->zero_copy; }

Client::Client(std::string_view url, Options options) : core_(make_core(url, std::move(options))) {
  core_->start();
}

Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

std::string_view Client::transport() const { return core_->transport(); }

bool Client::cluster() const { return core_->cluster(); }

bool Client::put(std::string_view key, ConstBytes value, PutOptions options) {
  return put(key, std::span<const ConstBytes>(&value, 1), options);
}

bool Client::put(std::string_view key, ConstBytes value, uint64_t ttl_ms) {
  return put(key, value, PutOptions{.ttl_ms = ttl_ms});
}

bool Client::put(std::string_view key, std::string_view value, PutOptions options) {
  return put(key, as_bytes(value), options);
}

bool Client::put(std::string_view key, std::span<const ConstBytes> pieces, PutOptions options) {
  const PutRequest req{key, pieces};
  Result r = batch_put({&req, 1}, options).front();
  if (r.status == Result::Status::kError) throw_result(r);
  return r.ok();
}

std::optional<std::string> Client::get(std::string_view key) {
  std::string out;
  auto n = get_with(key, [&](size_t len) {
    out.resize(len);
    return MutableBytes(reinterpret_cast<std::byte*>(out.data()), len);
  });
  if (!n) return std::nullopt;
  out.resize(*n);
  return out;
}

std::optional<size_t> Client::get_with(std::string_view key, const Allocator& alloc) {
  return detail::get_value_with(*core_, key, alloc);
}

std::optional<size_t> Client::get_into(std::string_view key, MutableBytes dst) {
  return get_into(key, std::span<const MutableBytes>(&dst, 1));
}

std::optional<size_t> Client::get_into(std::string_view key, std::span<const MutableBytes> pieces) {
  const GetRequest req{key, pieces};
  Result r = batch_get_into({&req, 1}).front();
  if (r.status == Result::Status::kError) throw_result(r);
  if (r.status == Result::Status::kMiss) return std::nullopt;
  return static_cast<size_t>(r.length);
}

std::vector<Result> Client::batch_put(std::span<const PutRequest> items, PutOptions options) {
  std::vector<PutItem> work;
  work.reserve(items.size());
  for (const PutRequest& it : items) work.push_back({it.key, it.pieces, total_of(it.pieces)});
  if (items.empty()) return {};
  return detail::put_values(*core_, work, options);
}

std::vector<Result> Client::batch_put(std::span<const std::string_view> keys,
                                      std::span<const ConstBytes> values, PutOptions options) {
  if (keys.size() != values.size())
    throw Error(Error::Kind::kUsage, "batch_put: as many values as keys are needed");
  std::vector<PutRequest> items;
  items.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) items.push_back({keys[i], values.subspan(i, 1)});
  return batch_put(items, options);
}

std::vector<Result> Client::batch_get_into(std::span<const GetRequest> items) {
  std::vector<GetItem> work;
  work.reserve(items.size());
  for (const GetRequest& it : items) work.push_back({it.key, it.pieces, total_of(it.pieces)});
  if (items.empty()) return {};
  return detail::get_values(*core_, work);
}

std::vector<Result> Client::batch_get_into(std::span<const std::string_view> keys,
                                           std::span<const MutableBytes> dsts) {
  if (keys.size() != dsts.size())
    throw Error(Error::Kind::kUsage, "batch_get_into: as many buffers as keys are needed");
  std::vector<GetRequest> items;
  items.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) items.push_back({keys[i], dsts.subspan(i, 1)});
  return batch_get_into(items);
}

bool Client::exists(std::string_view key) { return batch_exists({&key, 1}).front(); }

std::vector<bool> Client::batch_exists(std::span<const std::string_view> keys) {
  const std::vector<Result> rs = detail::routed_exists(*core_, keys);
  std::vector<bool> out(keys.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].status == Result::Status::kError) throw_result(rs[i]);
    out[i] = rs[i].ok();
  }
  return out;
}

size_t Client::prefix_match(std::span<const std::string_view> keys, std::optional<uint64_t> pin_ms) {
  return detail::routed_prefix(*core_, keys, pin_ms);
}

size_t Client::unpin(std::span<const std::string_view> keys) { return detail::routed_unpin(*core_, keys); }

bool Client::remove(std::string_view key) { return batch_remove({&key, 1}) == 1; }

size_t Client::batch_remove(std::span<const std::string_view> keys) {
  return detail::routed_remove(*core_, keys);
}

std::vector<std::string> Client::scan(std::string_view pattern) { return detail::routed_scan(*core_, pattern); }

Buffer Client::alloc_buffer(size_t size) { return Buffer(core_->shared().alloc(size)); }

Buffer Client::register_buffer(void* ptr, size_t size) { return Buffer(core_->shared().wrap(ptr, size)); }

}  // namespace stratakv
