#include "cluster/repl_frame.h"

#include <bit>

namespace cluster {

namespace {
static_assert(std::endian::native == std::endian::little,
              "the replication stream is little-endian; add byte swaps for this target");

template <class T>
void put(char*& p, T v) {
  std::memcpy(p, &v, sizeof v);
  p += sizeof v;
}
template <class T>
T get(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}
}  // namespace

void encode_header(const FrameHeader& h, char* out) {
  char* p = out;
  put<uint8_t>(p, static_cast<uint8_t>(h.type));
  put<uint8_t>(p, 0);
  put<uint16_t>(p, 0);
  put<uint32_t>(p, h.key_len);
  put<uint64_t>(p, h.value_len);
  put<int64_t>(p, h.expire_ms);
}

void append_frame_head(std::string& out, FrameType type, std::string_view key,
                       uint64_t value_len, int64_t expire_ms) {
  const size_t at = out.size();
  out.resize(at + FrameHeader::kSize);
  encode_header({type, static_cast<uint32_t>(key.size()), value_len, expire_ms}, out.data() + at);
  out.append(key);
}

std::optional<FrameHeader> decode_header(const char* in) {
  const char* p = in;
  FrameHeader h;
  const auto type = get<uint8_t>(p);
  p += 3;
  h.key_len = get<uint32_t>(p);
  h.value_len = get<uint64_t>(p);
  h.expire_ms = get<int64_t>(p);
  if (type < static_cast<uint8_t>(FrameType::kSet) || type > static_cast<uint8_t>(FrameType::kTopology))
    return std::nullopt;
  h.type = static_cast<FrameType>(type);
  if (h.key_len > kMaxFrameKey) return std::nullopt;
  // Only SET carries bytes; the others use value_len as a count or an offset.
  if (h.type == FrameType::kSet && h.value_len > kMaxFrameValue) return std::nullopt;
  return h;
}

}  // namespace cluster
