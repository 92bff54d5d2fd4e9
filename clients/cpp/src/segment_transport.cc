// segment_transport.cc - the fast path's common part (docs/fast-path.md): payloads stay in
// client memory registered on the connection as segments; commands name them as
// (segment offset length) descriptors. A SegmentBackend says how memory is registered: a memfd
// passed over the Unix socket (shm_transport.cc) or a buffer registered with the NIC
// (verbs_transport.cc).
//
// A piece inside a zero-copy Buffer (alloc_buffer) is named where it lies: the server copies
// it once, straight to or from the value's home. Any other piece is staged: copied into (or
// out of) this connection's staging buffer, registered on the connection, that grows on
// demand up to Options::max_staging_bytes. Items that cannot be staged (larger than that) or
// that are empty go over plain RESP on the same connection.
#include <cstring>
#include <unordered_map>
#include <vector>

#include "core.h"
#include "session.h"
#include "segment_transport.h"

namespace stratakv::detail {
namespace {

constexpr size_t kStagingGranule = size_t{1} << 20;

struct Desc {
  uint64_t seg, off, len;
};

// The pieces of a batch, each resolved once: a zero-copy buffer holding it, or null (staged).
struct Resolved {
  std::vector<std::shared_ptr<BufferState>> bufs;  // per piece, all items flattened
  std::vector<size_t> first;                       // per item: its first piece in `bufs`
  std::vector<uint64_t> staged;                    // per item: bytes to stage
};

template <class Item>
Resolved resolve(std::span<const Item> items, const ClientCore& core) {
  Resolved r;
  r.first.reserve(items.size());
  r.staged.reserve(items.size());
  for (const Item& it : items) {
    r.first.push_back(r.bufs.size());
    uint64_t staged = 0;
    for (const auto& p : it.pieces) {
      auto b = p.empty() ? nullptr : core.find_zero_copy(p.data(), p.size());
      if (!b) staged += p.size();
      r.bufs.push_back(std::move(b));
    }
    r.staged.push_back(staged);
  }
  return r;
}

class SegmentTransport final : public Transport {
 public:
  SegmentTransport(Session& s, ClientCore& core, std::unique_ptr<SegmentBackend> backend)
      : s_(s), core_(core), resp_(make_resp_transport(s)), max_(core.options().max_staging_bytes),
        backend_(std::move(backend)) {
    grow(core.options().initial_staging_bytes);  // also asks the server whether it can
  }
  std::string_view name() const override { return backend_->name(); }

  void put(std::span<const PutItem> items, const PutOptions& o, std::span<Result> out) override {
    Resolved r = resolve(items, core_);
    run_rounds(items, r, [&](std::span<const size_t> round) { put_round(items, r, round, o, out); },
               [&](size_t i) { resp_->put(items.subspan(i, 1), o, out.subspan(i, 1)); },
               [](const PutItem& it) { return it.total == 0; });
  }

  void get_into(std::span<const GetItem> items, std::span<Result> out) override {
    Resolved r = resolve(items, core_);
    run_rounds(items, r, [&](std::span<const size_t> round) { get_round(items, r, round, out); },
               [&](size_t i) { resp_->get_into(items.subspan(i, 1), out.subspan(i, 1)); },
               [](const GetItem& it) { return it.window == 0; });
  }

  std::optional<size_t> get_with(std::string_view key, const Allocator& alloc) override {
    for (int attempt = 0; attempt < 3; ++attempt) {
      Args a{"KV.GET", key};
      a.add(staging_->seg).add(uint64_t{0}).add(staging_->size);
      Reply r = s_.call(a);
      if (r->type == REDIS_REPLY_NIL) return std::nullopt;
      if (r->type == REDIS_REPLY_INTEGER) {
        const size_t n = static_cast<size_t>(r->integer);
        MutableBytes dst = alloc(n);
        if (dst.size() < n) throw Error(Error::Kind::kUsage, "the allocator gave too few bytes");
        std::memcpy(dst.data(), staging_->data, n);
        return n;
      }
      if (r->type != REDIS_REPLY_ERROR) s_.protocol_fail("unexpected reply to KV.GET");
      auto size = window_error_value(text(r.get()));
      if (!size) throw Error(Error::Kind::kServer, std::string(text(r.get())));
      if (*size > max_) break;
      grow(*size);
    }
    return resp_->get_with(key, alloc);  // too large to stage (or still growing)
  }

  void forget_buffers(std::span<const uint64_t> ids) override {
    size_t sent = 0;
    for (uint64_t id : ids) {
      auto it = segs_.find(id);
      if (it == segs_.end()) continue;
      Args a{"KV.UNREGISTER"};
      a.add(it->second);
      s_.append(a);
      segs_.erase(it);
      ++sent;
    }
    for (size_t i = 0; i < sent; ++i) s_.read();
  }

 private:
  // Splits the items into rounds whose staged bytes fit the staging buffer; items that must
  // go over RESP (too big to stage, or empty) go one by one, in order.
  template <class Item, class Round, class Single, class Empty>
  void run_rounds(std::span<const Item> items, const Resolved& r, Round&& round_fn,
                  Single&& single_fn, Empty&& empty) {
    std::vector<size_t> round;
    uint64_t staged = 0;
    auto flush = [&] {
      if (!round.empty()) round_fn(round);
      round.clear();
      staged = 0;
    };
    for (size_t i = 0; i < items.size(); ++i) {
      if (empty(items[i]) || r.staged[i] > max_) {
        flush();  // keeps the items' order (a batch may name one key twice)
        single_fn(i);
        continue;
      }
      if (staged + r.staged[i] > max_) flush();
      round.push_back(i);
      staged += r.staged[i];
    }
    flush();
  }

  // Appends the descriptors of one item's pieces, staging what is not zero-copy (copy_in:
  // copy the bytes into the staging buffer now). Adjacent pieces of one segment merge.
  template <class Item>
  void describe(const Item& it, const Resolved& r, size_t i, uint64_t& stage_off, bool copy_in,
                std::vector<Desc>& out) {
    size_t k = r.first[i];
    for (const auto& p : it.pieces) {
      const auto& b = r.bufs[k++];
      if (p.empty()) continue;
      Desc d;
      if (b) {
        d = {segment_of(*b), static_cast<uint64_t>(reinterpret_cast<const std::byte*>(p.data()) - b->base),
             p.size()};
      } else {
        if (copy_in) std::memcpy(staging_->data + stage_off, p.data(), p.size());
        d = {staging_->seg, stage_off, p.size()};
        stage_off += p.size();
      }
      if (!out.empty() && out.back().seg == d.seg && out.back().off + out.back().len == d.off)
        out.back().len += d.len;
      else
        out.push_back(d);
    }
  }

  static void add_descs(Args& a, const std::vector<Desc>& descs) {
    for (const Desc& d : descs) a.add(d.seg).add(d.off).add(d.len);
  }

  uint64_t staged_total(const Resolved& r, std::span<const size_t> round) {
    uint64_t n = 0;
    for (size_t i : round) n += r.staged[i];
    return n;
  }

  void put_round(std::span<const PutItem> items, const Resolved& r, std::span<const size_t> round,
                 const PutOptions& o, std::span<Result> out) {
    grow(staged_total(r, round));
    const bool multi = round.size() > 1;
    Args a{multi ? "KV.MPUT" : "KV.PUT"};
    if (multi) a.add(round.size());
    uint64_t stage_off = 0;
    std::vector<Desc> descs;
    for (size_t i : round) {
      descs.clear();
      describe(items[i], r, i, stage_off, true, descs);
      a.add(items[i].key).add(items[i].total);
      if (multi) a.add(descs.size());
      add_descs(a, descs);
    }
    if (o.ttl_ms > 0) a.add("PX").add(o.ttl_ms);
    if (o.nx) a.add("NX");
    Reply reply = s_.call(a);
    for_each_result(reply.get(), round, [&](size_t i, const redisReply* e) {
      if (e->type == REDIS_REPLY_STATUS) out[i] = {Result::Status::kOk, items[i].total, {}};
      else if (e->type == REDIS_REPLY_NIL) out[i] = {Result::Status::kMiss, 0, {}};
      else if (e->type == REDIS_REPLY_ERROR) out[i] = {Result::Status::kError, 0, std::string(text(e))};
      else s_.protocol_fail("unexpected reply to KV.PUT");
    });
  }

  void get_round(std::span<const GetItem> items, const Resolved& r, std::span<const size_t> round,
                 std::span<Result> out) {
    grow(staged_total(r, round));
    const bool multi = round.size() > 1;
    Args a{multi ? "KV.MGET" : "KV.GET"};
    if (multi) a.add(round.size());
    uint64_t stage_off = 0;
    std::vector<Desc> descs;
    std::vector<uint64_t> first_off;  // per round item: where its staged pieces start
    for (size_t i : round) {
      descs.clear();
      first_off.push_back(stage_off);
      describe(items[i], r, i, stage_off, false, descs);
      a.add(items[i].key);
      if (multi) a.add(descs.size());
      add_descs(a, descs);
    }
    Reply reply = s_.call(a);
    size_t j = 0;
    for_each_result(reply.get(), round, [&](size_t i, const redisReply* e) {
      const uint64_t off = first_off[j++];
      if (e->type == REDIS_REPLY_INTEGER && e->integer >= 0) {
        out[i] = {Result::Status::kOk, static_cast<uint64_t>(e->integer), {}};
        copy_out(items[i], r, i, off, out[i].length);
      } else if (e->type == REDIS_REPLY_NIL) {
        out[i] = {Result::Status::kMiss, 0, {}};
      } else if (e->type == REDIS_REPLY_ERROR) {
        out[i] = {Result::Status::kError, 0, std::string(text(e))};
      } else {
        s_.protocol_fail("unexpected reply to KV.GET");
      }
    });
  }

  // The value filled the window from its start: copies its staged pieces back to the caller.
  void copy_out(const GetItem& it, const Resolved& r, size_t i, uint64_t stage_off, uint64_t length) {
    size_t k = r.first[i];
    uint64_t left = length;
    for (const auto& p : it.pieces) {
      const bool staged = !r.bufs[k++] && !p.empty();
      const size_t step = static_cast<size_t>(std::min<uint64_t>(left, p.size()));
      if (staged) {
        if (step > 0) std::memcpy(p.data(), staging_->data + stage_off, step);
        stage_off += p.size();
      }
      left -= step;
    }
  }

  // One reply per round item: an array for KV.MPUT/KV.MGET (or one error for all of them).
  template <class F>
  void for_each_result(const redisReply* reply, std::span<const size_t> round, F&& f) {
    if (round.size() == 1 || reply->type == REDIS_REPLY_ERROR) {
      for (size_t i : round) f(i, reply);
      return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != round.size())
      s_.protocol_fail("a batch reply of the wrong shape");
    for (size_t j = 0; j < round.size(); ++j) f(round[j], reply->element[j]);
  }

  uint64_t segment_of(const BufferState& b) {
    auto it = segs_.find(b.id);
    if (it != segs_.end()) return it->second;
    const uint64_t seg = backend_->register_segment(b);
    segs_.emplace(b.id, seg);
    return seg;
  }

  // Makes the staging buffer at least `need` bytes (need <= max_).
  void grow(uint64_t need) {
    const size_t now = staging_ ? staging_->size : 0;
    if (now > 0 && now >= need) return;
    size_t size = std::max<size_t>(need, std::min<size_t>(2 * now, max_));
    if (size > kStagingGranule) size = (size + kStagingGranule - 1) / kStagingGranule * kStagingGranule;
    size = std::min(size, std::max<size_t>(max_, need));
    std::unique_ptr<Staging> next = backend_->make_staging(size);
    if (staging_) {
      Args a{"KV.UNREGISTER"};
      a.add(staging_->seg);
      s_.call(a);
    }
    staging_ = std::move(next);
  }

  Session& s_;
  ClientCore& core_;
  std::unique_ptr<Transport> resp_;  // for what cannot be staged
  const size_t max_;
  std::unique_ptr<SegmentBackend> backend_;  // before staging_: outlives it
  std::unique_ptr<Staging> staging_;
  std::unordered_map<uint64_t, uint64_t> segs_;  // buffer id -> segment id on this connection
};

}  // namespace

uint64_t segment_id(Session& s, const Reply& r) {
  if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(text(r.get())));
  if (r->type != REDIS_REPLY_INTEGER || r->integer <= 0)
    s.protocol_fail("unexpected reply to KV.REGISTER");
  return static_cast<uint64_t>(r->integer);
}

std::unique_ptr<Transport> make_segment_transport(Session& s, ClientCore& core,
                                                  std::unique_ptr<SegmentBackend> backend) {
  return std::make_unique<SegmentTransport>(s, core, std::move(backend));
}

}  // namespace stratakv::detail
