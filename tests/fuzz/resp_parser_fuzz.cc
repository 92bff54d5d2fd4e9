// tests/fuzz/resp_parser_fuzz.cc - libFuzzer target of the RESP request parser (resp/parser.h).
//
// Input: 4 control bytes, then the bytes a client sends. The control bytes choose the limits
// (small ones, so the "too big" paths are reached), whether the connection is unauthenticated,
// whether large bulks go to an allocator (which succeeds, fails or discards) and whether they
// are filled through large_bulk_window(), and seed the sizes of the chunks the stream is fed in.
// The stream is parsed twice, in those chunks and in one piece: both must give the same
// requests and the same first error. Checked on the way: consumed <= chunk, all of a chunk is
// consumed unless a request or an error stops it, every request is within the limits, an error
// is sticky until reset().
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "resp/parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

struct Config {
  resp::ParserLimits limits;
  bool unauth = false;
  int alloc_mode = 0;  // 0: none, 1: allocates, 2: fails (null data), 3: discards
  bool use_window = false;
  size_t threshold = 16;
  uint32_t seed = 1;
  size_t max_chunk = 1;
};

void release_buffer(void* p) noexcept { delete[] static_cast<char*>(p); }

// What one parse produced: each request as "I|" or "M|" then its arguments, and the first
// error's text.
struct Transcript {
  std::vector<std::string> requests;
  std::string error;
  bool operator==(const Transcript&) const = default;
};

void check_request(const Config& cfg, const resp::Request& req, Transcript* out) {
  CHECK(!req.empty());
  CHECK(req.args().size() == req.size());
  const auto& lim = cfg.limits;
  std::string line = req.inline_command() ? "I" : "M";
  size_t total = 0;
  for (size_t i = 0; i < req.size(); ++i) {
    const std::string_view a = req[i];
    total += a.size();
    if (req.inline_command()) {
      CHECK(!req.owner(i));
    } else {
      CHECK(static_cast<int64_t>(a.size()) <= lim.max_bulk_len);
      if (cfg.unauth) CHECK(static_cast<int64_t>(a.size()) <= lim.unauth_max_bulk_len);
      if (req.owner(i)) CHECK(cfg.alloc_mode == 1 && a.size() >= cfg.threshold);
    }
    line += '|';
    line.append(a.data(), a.size());  // reads every byte: ASan checks the view
  }
  if (req.inline_command()) {
    CHECK(total <= lim.max_inline_len);
  } else {
    CHECK(static_cast<int64_t>(req.size()) <= lim.max_multibulk_len);
    if (cfg.unauth) CHECK(req.size() <= lim.unauth_max_multibulk_len);
  }
  out->requests.push_back(std::move(line));
}

Transcript parse(const Config& cfg, const uint8_t* data, size_t size, bool chunked) {
  Transcript t;
  resp::Parser* self = nullptr;
  resp::BulkAllocator alloc;
  if (cfg.alloc_mode != 0) {
    alloc = [&cfg, &self](size_t len) {
      CHECK(len >= cfg.threshold);
      std::vector<std::string_view> partial;
      const size_t announced = self->partial_request(&partial);
      CHECK(announced >= partial.size() + 1);
      for (auto a : partial) {
        CHECK(static_cast<int64_t>(a.size()) <= cfg.limits.max_bulk_len);
        volatile char sink = 0;
        for (char c : a) sink = sink ^ c;  // the views must be readable (ASan)
      }
      resp::LargeBulk lb;
      if (cfg.alloc_mode == 1) {
        char* buf = new char[len > 0 ? len : 1];
        lb.data = buf;
        lb.owner = resp::Keepalive(buf, release_buffer);
      } else if (cfg.alloc_mode == 3) {
        lb.discard = true;
      }
      return lb;
    };
  }
  resp::Parser parser(cfg.limits, std::move(alloc), cfg.threshold);
  self = &parser;
  parser.set_unauthenticated(cfg.unauth);
  uint32_t rng = cfg.seed | 1;
  size_t pos = 0;
  size_t chunk_left = 0;
  while (pos < size) {
    if (chunk_left == 0) {
      if (chunked) {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        chunk_left = 1 + rng % cfg.max_chunk;
      } else {
        chunk_left = size - pos;
      }
      chunk_left = std::min(chunk_left, size - pos);
    }
    // A fresh heap copy of the chunk: ASan sees any read past its end.
    std::unique_ptr<char[]> chunk(new char[chunk_left]);
    std::memcpy(chunk.get(), data + pos, chunk_left);
    size_t used = 0;
    if (cfg.use_window) {
      const std::span<char> w = parser.large_bulk_window();
      if (!w.empty()) {
        used = std::min(w.size(), chunk_left);
        std::memcpy(w.data(), chunk.get(), used);
        parser.commit_large_bulk(used);
        pos += used;
        chunk_left -= used;
        continue;
      }
    }
    resp::Parser::Status st;
    used = parser.feed(chunk.get(), chunk_left, &st);
    CHECK(used <= chunk_left);
    pos += used;
    chunk_left -= used;
    switch (st) {
      case resp::Parser::Status::kNeedMore:
        CHECK(chunk_left == 0);
        CHECK(parser.large_bulk_window().size() <= static_cast<size_t>(cfg.limits.max_bulk_len));
        break;
      case resp::Parser::Status::kRequest:
        CHECK(used > 0);
        check_request(cfg, parser.request(), &t);
        CHECK(parser.reserved_bulk_bytes() == 0);
        if (t.requests.size() % 3 == 0) parser.release_request();
        break;
      case resp::Parser::Status::kError: {
        CHECK(!parser.error().empty());
        CHECK(parser.error().rfind("ERR Protocol error: ", 0) == 0);
        t.error = parser.error();
        resp::Parser::Status again;
        const char c = 'x';
        CHECK(parser.feed(&c, 1, &again) == 0 && again == resp::Parser::Status::kError);
        parser.reset();
        CHECK(parser.reserved_bytes() == 0);
        return t;  // where an error is found depends on the chunks: stop at the first
      }
    }
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  Config cfg;
  const uint8_t flags = data[0];
  cfg.unauth = flags & 1;
  cfg.alloc_mode = (flags >> 1) & 3;
  cfg.use_window = flags & 8;
  cfg.limits.max_inline_len = (flags & 16) ? 64 * 1024 : 16 + data[1] % 64;
  cfg.limits.max_bulk_len = (flags & 32) ? 1 << 16 : 8 + data[1] % 128;
  cfg.limits.max_multibulk_len = (flags & 64) ? 1 << 20 : 1 + data[1] % 8;
  cfg.limits.unauth_max_multibulk_len = 3;
  cfg.limits.unauth_max_bulk_len = 24;
  cfg.threshold = (flags & 128) ? 0 : 1 + data[2] % 32;
  cfg.seed = uint32_t{data[2]} << 8 | data[3];
  cfg.max_chunk = 1 + data[3] % 16;
  data += 4;
  size -= 4;
  const Transcript chunked = parse(cfg, data, size, true);
  const Transcript whole = parse(cfg, data, size, false);
  // The same requests and the same first error, however the stream was cut.
  CHECK(chunked.requests == whole.requests);
  CHECK(chunked.error == whole.error);

  std::vector<std::string> args;
  resp::split_inline_args(std::string_view(reinterpret_cast<const char*>(data), size), &args);
  return 0;
}
