// striping.cc - puts and gets of striped values (striping.h; the format: stripe_format.h).
#include "striping.h"

#include <chrono>
#include <cstring>
#include <random>

#include "routed_ops.h"
#include "stripe_format.h"

namespace stratakv::detail {
namespace {

constexpr int64_t kManifestMarginMs = 10;

uint64_t new_version() {
  thread_local std::mt19937_64 rng{(uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  return rng();
}

// A striped value found by a read: its key, its manifest and the window it goes to.
struct Found {
  std::string_view key;
  stripe::Manifest m;
  std::span<const MutableBytes> window;
};

// Reads the parts of every found value into its window (one batch over the nodes). Result i
// for found[i]: kOk with the total, kMiss (a part missing, or of another length), or kError.
std::vector<Result> read_parts(ClusterCore& cc, const std::vector<Found>& found) {
  std::vector<std::string> keys;
  std::vector<std::vector<MutableBytes>> windows;
  for (const Found& f : found) {
    for (size_t j = 0; j < f.m.parts.size(); ++j) {
      keys.push_back(stripe::part_key(f.key, f.m, j));
      windows.push_back(stripe::slice(f.window, f.m.offset(j), f.m.parts[j].length));
    }
  }
  std::vector<GetItem> parts;  // views into keys and windows, which no longer grow
  for (size_t k = 0; k < keys.size(); ++k) {
    uint64_t window = 0;
    for (MutableBytes b : windows[k]) window += b.size();
    parts.push_back({keys[k], windows[k], window});
  }
  const std::vector<Result> got = routed_get_into(cc, parts);
  std::vector<Result> out(found.size());
  size_t k = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    Result r{Result::Status::kOk, found[i].m.total, {}};
    for (const stripe::Part& p : found[i].m.parts) {
      const Result& g = got[k++];
      if (g.ok() && g.length == p.length) continue;
      // A part of another length (its window was exactly the part's) is no part of this value.
      const bool mismatch = g.status != Result::Status::kError || window_error_value(g.error);
      if (mismatch && r.status == Result::Status::kOk) r = {Result::Status::kMiss, 0, {}};
      if (!mismatch && r.status != Result::Status::kError) r = {Result::Status::kError, 0, g.error};
    }
    out[i] = std::move(r);
  }
  return out;
}

// The first `n` bytes of a window (n <= its size), copied out.
std::vector<std::byte> head_of(std::span<const MutableBytes> window, size_t n) {
  std::vector<std::byte> out(n);
  size_t at = 0;
  for (MutableBytes p : window) {
    const size_t step = std::min(p.size(), n - at);
    std::memcpy(out.data() + at, p.data(), step);
    if ((at += step) == n) break;
  }
  return out;
}

// A value of at most a manifest's size, read alone (its window was too small to hold it).
std::optional<stripe::Manifest> read_manifest(ClusterCore& cc, std::string_view key) {
  std::vector<std::byte> head;
  auto n = routed_get_with(cc, key, [&](size_t len) {
    head.resize(len);
    return MutableBytes(head);
  });
  if (!n) return std::nullopt;
  return stripe::decode(head);
}

}  // namespace

std::vector<Result> put_values(ClusterCore& cc, std::span<const PutItem> items, const PutOptions& options) {
  if (options.stripes < 2) return routed_put(cc, items, options);
  const std::shared_ptr<const SlotMap> map = cc.map();
  std::vector<stripe::Manifest> plans(items.size());
  std::vector<size_t> striped;
  for (size_t i = 0; i < items.size(); ++i) {
    plans[i] = stripe::plan(items[i].total, options.stripes, new_version());
    if (plans[i].parts.empty()) continue;
    stripe::choose_tags(plans[i], *map);
    striped.push_back(i);
  }
  PutOptions plain = options;
  plain.stripes = 0;
  if (striped.empty()) return routed_put(cc, items, plain);

  // 1. The parts, with the TTL.
  const uint64_t ttl = options.ttl_ms > 0 ? options.ttl_ms : cc.options().stripe_ttl_ms;
  std::vector<std::string> keys;
  std::vector<std::vector<ConstBytes>> pieces;
  for (size_t i : striped) {
    for (size_t j = 0; j < plans[i].parts.size(); ++j) {
      keys.push_back(stripe::part_key(items[i].key, plans[i], j));
      pieces.push_back(stripe::slice(items[i].pieces, plans[i].offset(j), plans[i].parts[j].length));
    }
  }
  std::vector<PutItem> parts;
  size_t k = 0;
  for (size_t i : striped)
    for (const stripe::Part& p : plans[i].parts) parts.push_back({keys[k], pieces[k], p.length}), ++k;
  const auto started = std::chrono::steady_clock::now();
  const std::vector<Result> part_out = routed_put(cc, parts, {.ttl_ms = ttl});
  // The parts' deadline, less the time they took and a margin for the manifest's own trip.
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started).count() + kManifestMarginMs;

  // 2. The manifests of the values whose parts all landed, expiring no later than the parts;
  //    the values too small to stripe, as they are.
  std::vector<Result> out(items.size());
  std::vector<std::string> manifests;
  manifests.reserve(striped.size());
  std::vector<ConstBytes> manifest_bytes;
  manifest_bytes.reserve(striped.size());
  std::vector<PutItem> last;
  std::vector<size_t> last_of;
  k = 0;
  for (size_t i : striped) {
    const Result* failed = nullptr;
    for (size_t j = 0; j < plans[i].parts.size(); ++j, ++k)
      if (!part_out[k].ok() && !failed) failed = &part_out[k];
    if (failed) {  // its parts expire
      out[i] = {Result::Status::kError, 0, failed->error};
      continue;
    }
    manifests.push_back(stripe::encode(plans[i]));
    manifest_bytes.push_back(as_bytes(manifests.back()));
    last.push_back({items[i].key, {&manifest_bytes.back(), 1}, manifests.back().size()});
    last_of.push_back(i);
  }
  PutOptions mo = plain;
  mo.ttl_ms = ttl > static_cast<uint64_t>(elapsed) ? ttl - static_cast<uint64_t>(elapsed) : 1;
  const std::vector<Result> manifest_out = routed_put(cc, last, mo);
  for (size_t m = 0; m < last.size(); ++m) {
    out[last_of[m]] = manifest_out[m];
    if (manifest_out[m].ok()) out[last_of[m]].length = items[last_of[m]].total;
  }
  std::vector<PutItem> small;
  std::vector<size_t> small_of;
  for (size_t i = 0; i < items.size(); ++i)
    if (plans[i].parts.empty()) small.push_back(items[i]), small_of.push_back(i);
  const std::vector<Result> small_out = routed_put(cc, small, plain);
  for (size_t m = 0; m < small.size(); ++m) out[small_of[m]] = small_out[m];
  return out;
}

std::vector<Result> get_values(ClusterCore& cc, std::span<const GetItem> items) {
  std::vector<Result> out = routed_get_into(cc, items);
  std::vector<Found> found;
  std::vector<size_t> found_of;
  for (size_t i = 0; i < items.size(); ++i) {
    Result& r = out[i];
    if (r.ok() && stripe::may_be_manifest(r.length)) {
      if (!stripe::has_magic(head_of(items[i].pieces, 8))) continue;  // a small plain value
      auto m = stripe::decode(head_of(items[i].pieces, static_cast<size_t>(r.length)));
      if (!m) continue;
      if (m->total > items[i].window) {
        r = {Result::Status::kError, 0, window_error(items[i].window, m->total)};
        continue;
      }
      found.push_back({items[i].key, std::move(*m), items[i].pieces});
      found_of.push_back(i);
    } else if (r.status == Result::Status::kError) {
      // A window smaller than a manifest: report the striped value's own length.
      auto v = window_error_value(r.error);
      if (!v || !stripe::may_be_manifest(*v)) continue;
      if (auto m = read_manifest(cc, items[i].key)) r.error = window_error(items[i].window, m->total);
    }
  }
  if (found.empty()) return out;
  const std::vector<Result> values = read_parts(cc, found);
  for (size_t f = 0; f < found.size(); ++f) out[found_of[f]] = values[f];
  return out;
}

std::optional<size_t> get_value_with(ClusterCore& cc, std::string_view key, const Allocator& alloc) {
  std::vector<std::byte> head;  // a value that may be a manifest lands here first
  bool in_head = false;
  std::optional<size_t> n = routed_get_with(cc, key, [&](size_t len) {
    in_head = stripe::may_be_manifest(len);
    if (!in_head) return alloc(len);
    head.resize(len);
    return MutableBytes(head);
  });
  if (!n || !in_head) return n;
  std::optional<stripe::Manifest> m = stripe::decode(head);
  if (!m) {  // a small plain value
    MutableBytes dst = alloc(*n);
    if (dst.size() < *n) throw Error(Error::Kind::kUsage, "the allocator gave too few bytes");
    std::memcpy(dst.data(), head.data(), *n);
    return n;
  }
  const MutableBytes dst = alloc(static_cast<size_t>(m->total));
  if (dst.size() < m->total) throw Error(Error::Kind::kUsage, "the allocator gave too few bytes");
  const uint64_t total = m->total;
  std::vector<Found> found{{key, std::move(*m), {&dst, 1}}};
  const Result r = read_parts(cc, found).front();
  if (r.status == Result::Status::kError) throw Error(Error::Kind::kServer, r.error);
  if (!r.ok()) return std::nullopt;
  return static_cast<size_t>(total);
}

}  // namespace stratakv::detail
