// server/commands/cmd_lcs.cc - LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the
// longest common subsequence of two strings, as Redis 7.0's t_string.c lcsCommand (the same
// table walk, so ties resolve and ranges come out as Redis's do).
#include <cstdint>
#include <vector>

#include "server/arg_parser.h"
#include "server/commands/family.h"
#include "server/config.h"
#include "server/errors.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

struct LcsRange {
  uint32_t a_start, a_end, b_start, b_end;
};

void cmd_lcs(CommandContext& ctx) {
  // The two values, referenced: the table is computed with no lock held (a held reference
  // keeps either value from being changed in place).
  tiering::ValueRef va, vb;
  {
    const std::string_view keys[] = {ctx.args[1], ctx.args[2]};
    tiering::KeyLock lock(ctx.ks, keys, ctx.now_ms);
    if (const auto* item = lock.lookup(keys[0])) va = item->second.value;
    if (const auto* item = lock.lookup(keys[1])) vb = item->second.value;
  }
  const std::string_view a = va ? va->view() : std::string_view();
  const std::string_view b = vb ? vb->view() : std::string_view();
  bool get_len = false, get_idx = false, with_match_len = false;
  int64_t min_match_len = 0;
  for (size_t j = 3; j < ctx.args.size(); ++j) {
    const std::string_view opt = ctx.args[j];
    const bool more = j + 1 < ctx.args.size();
    if (iequals(opt, "idx")) {
      get_idx = true;
    } else if (iequals(opt, "len")) {
      get_len = true;
    } else if (iequals(opt, "withmatchlen")) {
      with_match_len = true;
    } else if (iequals(opt, "minmatchlen") && more) {
      auto n = parse_int(ctx.args[++j]);
      if (!n) return ctx.out.error(err::kNotInteger);
      min_match_len = *n < 0 ? 0 : *n;
    } else {
      return ctx.out.error(err::kSyntax);
    }
  }
  if (get_idx && get_len) return ctx.out.error(err::kLcsLenAndIdx);
  if (a.size() >= UINT32_MAX - 1 || b.size() >= UINT32_MAX - 1)
    return ctx.out.error(err::kLcsTooLong);
  const uint64_t alen = a.size(), blen = b.size();
  // The table's bytes, checked without overflow ((2^32)^2 * 4 does not fit 64 bits).
  uint64_t cells = 0, bytes = 0;
  if (__builtin_mul_overflow(alen + 1, blen + 1, &cells) ||
      __builtin_mul_overflow(cells, uint64_t{sizeof(uint32_t)}, &bytes) ||
      bytes > static_cast<uint64_t>(ctx.server.config().num(Key::kProtoMaxBulkLen)))
    return ctx.out.error(err::kLcsTooBig);
  std::vector<uint32_t> lcs(cells, 0);
  auto at = [&](uint64_t i, uint64_t j) -> uint32_t& { return lcs[j + i * (blen + 1)]; };
  for (uint64_t i = 1; i <= alen; ++i)
    for (uint64_t j = 1; j <= blen; ++j)
      at(i, j) = a[i - 1] == b[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));

  const uint32_t total = at(alen, blen);
  uint32_t idx = total;
  std::string result;
  const bool compute = get_idx || !get_len;
  if (compute) result.assign(idx, '\0');
  std::vector<LcsRange> ranges;
  const uint32_t unset = static_cast<uint32_t>(alen);
  uint32_t as = unset, ae = 0, bs = 0, be = 0;
  uint64_t i = alen, j = blen;
  while (compute && i > 0 && j > 0) {
    bool emit = false;
    if (a[i - 1] == b[j - 1]) {
      result[idx - 1] = a[i - 1];
      if (as == unset) {
        as = ae = static_cast<uint32_t>(i - 1);
        bs = be = static_cast<uint32_t>(j - 1);
      } else if (as == i && bs == j) {
        --as;
        --bs;
      } else {
        emit = true;
      }
      if (as == 0 || bs == 0) emit = true;
      --idx;
      --i;
      --j;
    } else {
      if (at(i - 1, j) > at(i, j - 1)) --i;
      else --j;
      if (as != unset) emit = true;
    }
    if (emit) {
      const uint32_t match_len = ae - as + 1;
      if (get_idx && (min_match_len == 0 || match_len >= min_match_len))
        ranges.push_back({as, ae, bs, be});
      as = unset;
    }
  }
  if (get_idx) {
    ctx.out.map(2);
    ctx.out.bulk("matches");
    ctx.out.array(ranges.size());
    for (const LcsRange& r : ranges) {
      ctx.out.array(with_match_len ? 3 : 2);
      ctx.out.array(2);
      ctx.out.integer(r.a_start);
      ctx.out.integer(r.a_end);
      ctx.out.array(2);
      ctx.out.integer(r.b_start);
      ctx.out.integer(r.b_end);
      if (with_match_len) ctx.out.integer(r.a_end - r.a_start + 1);
    }
    ctx.out.bulk("len");
    ctx.out.integer(total);
  } else if (get_len) {
    ctx.out.integer(total);
  } else {
    ctx.out.bulk(result);
  }
}

}  // namespace

void register_lcs_command(CommandTable& t) {
  CommandBuilder b(t, "string");
  b.add("lcs", -3, kReadonly, {1, 2, 1}, cmd_lcs, {"Find longest common substring", "7.0.0", "O(N*M) where N and M are the lengths of s1 and s2, respectively"});
}

}  // namespace server
