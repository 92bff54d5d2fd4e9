// tests/fuzz/kv_layout_fuzz.cc - libFuzzer target of the fast path's batch layout
// (server/commands/kv_layout.h): KV.MPUT / KV.MGET arguments as a client sends them.
//
// Input: one control byte (bit 0: KV.MGET, else KV.MPUT), then the arguments after the command
// name, NUL-separated. Checked: every index an entry names lies inside the arguments; the
// entries come in order without overlap; each descriptor's fields parse as the layout says; an
// error stops the reading and names one of the texts the handler replies; the key finders agree
// with the entries the layout read (the same keys when well-formed, false when not); KV.MPUT's
// byte count is the sum of the entries' total_length (saturating), 0 when malformed; nothing
// reads past the arguments (ASan) and a made-up count costs no memory.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "server/commands/kv_layout.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  const bool get = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string_view> args{get ? "kv.mget" : "kv.mput"};
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      args.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  using server::BatchLayout;
  BatchLayout layout(args, get ? BatchLayout::Kind::kGet : BatchLayout::Kind::kPut);
  std::vector<size_t> keys;
  std::vector<rdma::Descriptor> sgl;
  uint64_t bytes = 0;
  size_t last = 1, entries = 0;
  server::BatchEntry e;
  while (layout.next(e, &sgl)) {
    ++entries;
    CHECK(e.key > last && e.key < args.size());
    CHECK(entries <= args.size());
    if (e.nsegs > 0) {
      CHECK(e.segs > e.key && e.segs + 3 * e.nsegs <= args.size());
      last = e.segs + 3 * e.nsegs - 1;
    } else {
      last = e.key + (get ? 1 : 2);
    }
    keys.push_back(e.key);
    bytes = e.total > std::numeric_limits<uint64_t>::max() - bytes
                ? std::numeric_limits<uint64_t>::max()
                : bytes + e.total;
    if (get) CHECK(e.total == 0);
  }
  const std::string_view error = layout.error();
  if (!error.empty()) {
    CHECK(error == "ERR value is not an integer or out of range" ||
          error == "ERR count must be positive" || error == "ERR syntax error");
  } else {
    CHECK(entries == layout.count());
    CHECK(layout.end() <= args.size());
  }
  std::vector<size_t> found;
  if (get) {
    const bool ok = server::mget_keys(args, found);
    CHECK(ok == (error.empty() && layout.end() == args.size()));
    if (ok) CHECK(found == keys);
  } else {
    const bool ok = server::mput_keys(args, found);
    CHECK(ok == error.empty());
    if (ok) CHECK(found == keys);
    CHECK(server::mput_bytes(args) == (error.empty() ? bytes : 0));
  }
  return 0;
}
