// server/commands/kv_layout.cc - the layout of KV.MPUT / KV.MGET batches. See kv_layout.h.
#include "server/commands/kv_layout.h"

#include <algorithm>
#include <limits>

#include "server/arg_parser.h"
#include "server/errors.h"

namespace server {

BatchLayout::BatchLayout(std::span<const std::string_view> args, Kind kind)
    : args_(args), kind_(kind) {
  const auto count = args_.size() < 2 ? std::nullopt : parse_int(args_[1]);
  if (args_.size() < 2) fail(err::kSyntax);
  else if (!count) fail(err::kNotInteger);
  else if (*count <= 0) fail(err::kCountNotPositive);
  else count_ = static_cast<uint64_t>(*count);
}

void BatchLayout::fail(std::string_view text) {
  if (error_.empty()) error_ = text;
}

bool BatchLayout::next(BatchEntry& e, std::vector<rdma::Descriptor>* sgl) {
  if (!error_.empty() || read_ == count_) return false;
  auto left = [this] { return args_.size() - at_; };  // at_ <= args_.size() always
  // A non-negative integer argument, consumed.
  auto number = [this](uint64_t& out) {
    const auto v = parse_int(args_[at_++]);
    if (!v || *v < 0) {
      fail(err::kNotInteger);
      return false;
    }
    out = static_cast<uint64_t>(*v);
    return true;
  };
  if (left() < (kind_ == Kind::kPut ? 3u : 2u)) {
    fail(err::kSyntax);
    return false;
  }
  e = BatchEntry{};
  e.key = at_++;
  if (kind_ == Kind::kPut && !number(e.total)) return false;
  uint64_t nsegs = 0;
  if (!number(nsegs)) return false;
  e.segs = at_;
  // nsegs comes from the client: reserve only what the arguments left can hold.
  if (sgl != nullptr) sgl->reserve(sgl->size() + std::min<uint64_t>(nsegs, left() / 3));
  // Each descriptor is read only if its three arguments are there: nsegs is bounded by them.
  for (uint64_t i = 0; i < nsegs; ++i) {
    if (left() < 3) {
      fail(err::kSyntax);
      return false;
    }
    uint64_t seg, off, len;
    if (!number(seg) || !number(off) || !number(len)) return false;
    if (sgl != nullptr) sgl->push_back({seg, off, len});
  }
  e.nsegs = static_cast<size_t>(nsegs);  // <= args_.size() / 3 by now
  ++read_;
  return true;
}

bool mput_keys(std::span<const std::string_view> args, std::vector<size_t>& out) {
  BatchLayout layout(args, BatchLayout::Kind::kPut);
  for (BatchEntry e; layout.next(e);) out.push_back(e.key);
  return layout.error().empty();
}

bool mget_keys(std::span<const std::string_view> args, std::vector<size_t>& out) {
  BatchLayout layout(args, BatchLayout::Kind::kGet);
  for (BatchEntry e; layout.next(e);) out.push_back(e.key);
  return layout.error().empty() && layout.end() == args.size();
}

uint64_t mput_bytes(std::span<const std::string_view> args) {
  BatchLayout layout(args, BatchLayout::Kind::kPut);
  uint64_t bytes = 0;
  for (BatchEntry e; layout.next(e);) {
    const uint64_t room = std::numeric_limits<uint64_t>::max() - bytes;
    bytes += e.total < room ? e.total : room;
  }
  return layout.error().empty() ? bytes : 0;
}

}  // namespace server
