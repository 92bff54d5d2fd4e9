// client.cc - stratakv::Client: each call borrows a pooled connection and hands the payload
// to that connection's transport (transport.h); control commands go through hiredis.
#include "stratakv/client.h"

#include <numeric>

#include "core.h"
#include "session.h"
#include "transport.h"

namespace stratakv {

using detail::Args;
using detail::ClientCore;
using detail::GetItem;
using detail::PutItem;
using detail::Reply;
using detail::Session;

namespace {

template <class Pieces>
uint64_t total_of(const Pieces& pieces) {
  uint64_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

[[noreturn]] void throw_result(const Result& r) { throw Error(Error::Kind::kServer, r.error); }

int64_t integer_reply(Session& s, Reply& r, const char* command) {
  if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(detail::text(r.get())));
  if (r->type != REDIS_REPLY_INTEGER) s.protocol_fail(std::string("unexpected reply to ") + command);
  return r->integer;
}

}  // namespace

std::byte* Buffer::data() const noexcept { return state_ ? state_->base : nullptr; }
size_t Buffer::size() const noexcept { return state_ ? state_->size : 0; }
bool Buffer::zero_copy() const noexcept { return state_ && state_->zero_copy; }

Client::Client(std::string_view url, Options options)
    : core_(std::make_shared<ClientCore>(detail::parse_url(url), std::move(options))) {
  core_->start();
}

Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

std::string_view Client::transport() const { return detail::traits(core_->choice()).name; }

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
  return out;
}

std::optional<size_t> Client::get_with(std::string_view key, const Allocator& alloc) {
  return core_->with_session([&](Session& s) { return s.transport().get_with(key, alloc); });
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
  std::vector<Result> out(items.size());
  if (items.empty()) return out;
  core_->with_session([&](Session& s) { s.transport().put(work, options, out); });
  return out;
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
  std::vector<Result> out(items.size());
  if (items.empty()) return out;
  core_->with_session([&](Session& s) { s.transport().get_into(work, out); });
  return out;
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
  std::vector<bool> out(keys.size());
  if (keys.empty()) return out;
  core_->with_session([&](Session& s) {
    for (std::string_view k : keys) {
      Args a{"EXISTS", k};
      s.append(a);
    }
    std::string error;
    for (size_t i = 0; i < keys.size(); ++i) {
      Reply r = s.read();
      if (r->type == REDIS_REPLY_ERROR && error.empty()) error = detail::text(r.get());
      else if (r->type == REDIS_REPLY_INTEGER) out[i] = r->integer > 0;
      else if (r->type != REDIS_REPLY_ERROR) s.protocol_fail("unexpected reply to EXISTS");
    }
    if (!error.empty()) throw Error(Error::Kind::kServer, error);
  });
  return out;
}

size_t Client::prefix_match(std::span<const std::string_view> keys, std::optional<uint64_t> pin_ms) {
  if (keys.empty()) return 0;
  // nullopt: the server has no KV.PREFIX (a plain Redis): count with EXISTS instead.
  auto prefix = [&](Session& s) -> std::optional<size_t> {
    Args a{"KV.PREFIX"};
    for (std::string_view k : keys) a.add(k);
    if (pin_ms) a.add("PIN").add(*pin_ms);
    Reply r = s.call(a);
    if (r->type == REDIS_REPLY_ERROR && detail::text(r.get()).starts_with("ERR unknown command"))
      return std::nullopt;
    return static_cast<size_t>(integer_reply(s, r, "KV.PREFIX"));
  };
  // Leases belong to the connection that took them: pins go through the lease connection.
  const std::optional<size_t> n = pin_ms ? core_->with_lease_session(prefix) : core_->with_session(prefix);
  if (n) return *n;
  std::vector<bool> present = batch_exists(keys);
  size_t count = 0;
  while (count < present.size() && present[count]) ++count;
  return count;
}

size_t Client::unpin(std::span<const std::string_view> keys) {
  if (keys.empty()) return 0;
  return core_->with_lease_session([&](Session& s) {
    Args a{"KV.UNPIN"};
    for (std::string_view k : keys) a.add(k);
    Reply r = s.call(a);
    return static_cast<size_t>(integer_reply(s, r, "KV.UNPIN"));
  });
}

bool Client::remove(std::string_view key) { return batch_remove({&key, 1}) == 1; }

size_t Client::batch_remove(std::span<const std::string_view> keys) {
  if (keys.empty()) return 0;
  return core_->with_session([&](Session& s) {
    Args a{"DEL"};
    for (std::string_view k : keys) a.add(k);
    Reply r = s.call(a);
    return static_cast<size_t>(integer_reply(s, r, "DEL"));
  });
}

Buffer Client::alloc_buffer(size_t size) { return Buffer(core_->alloc(size)); }

Buffer Client::register_buffer(void* ptr, size_t size) { return Buffer(core_->wrap(ptr, size)); }

}  // namespace stratakv
