// tests/fuzz/repl_frame_fuzz.cc - libFuzzer target of the replication frame header decoder
// (cluster/repl_frame.h decode_header). Decodes every 24-byte window of the input (each from a
// heap copy of exactly 24 bytes, so ASan sees a read past it); a header it accepts is within
// the limits and encodes back to the same bytes except the reserved ones.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cluster/repl_frame.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cluster::FrameHeader;
  using cluster::FrameType;
  for (size_t at = 0; at + FrameHeader::kSize <= size; at += FrameHeader::kSize) {
    std::unique_ptr<char[]> in(new char[FrameHeader::kSize]);
    std::memcpy(in.get(), data + at, FrameHeader::kSize);
    const auto h = cluster::decode_header(in.get());
    const uint8_t type = data[at];
    if (!h) continue;
    CHECK(type >= static_cast<uint8_t>(FrameType::kSet) &&
          type <= static_cast<uint8_t>(FrameType::kTopology));
    CHECK(static_cast<uint8_t>(h->type) == type);
    CHECK(h->key_len <= cluster::kMaxFrameKey);
    if (h->type == FrameType::kSet) CHECK(h->value_len <= cluster::kMaxFrameValue);
    char out[FrameHeader::kSize];
    cluster::encode_header(*h, out);
    CHECK(out[0] == in[0]);
    CHECK(std::memcmp(out + 4, in.get() + 4, FrameHeader::kSize - 4) == 0);
    CHECK(out[1] == 0 && out[2] == 0 && out[3] == 0);
    const auto again = cluster::decode_header(out);
    CHECK(again && again->type == h->type && again->key_len == h->key_len &&
          again->value_len == h->value_len && again->expire_ms == h->expire_ms);
    if (h->type == FrameType::kSet) CHECK(h->frame_size() >= FrameHeader::kSize);
    // append_frame_head with a short key agrees with encode_header.
    std::string head;
    const std::string key(h->key_len % 64, 'k');
    cluster::append_frame_head(head, h->type, key, h->value_len, h->expire_ms);
    CHECK(head.size() == FrameHeader::kSize + key.size());
    const auto from_head = cluster::decode_header(head.data());
    CHECK(from_head && from_head->key_len == key.size());
  }
  return 0;
}
