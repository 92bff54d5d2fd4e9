#include "stripe_format.h"

#include <cstring>

#include "cluster/slot.h"

namespace stratakv::detail::stripe {
namespace {

constexpr char kMagic[8] = {'S', 'K', 'V', 'S', 'T', 'R', 'P', '1'};

uint64_t fnv1a(const std::byte* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 0x100000001b3ull;
  return h;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_le(const std::byte* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string hex(uint64_t v, int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

}  // namespace

Manifest plan(uint64_t total, size_t stripes, uint64_t version) {
  Manifest m;
  m.total = total;
  m.version = version;
  stripes = std::min(stripes, kMaxParts);
  if (stripes < 2 || total < 2 * kPartAlign) return m;
  uint64_t part = (total + stripes - 1) / stripes;
  part = (part + kPartAlign - 1) / kPartAlign * kPartAlign;
  const uint64_t n = (total + part - 1) / part;
  if (n < 2) return m;
  for (uint64_t i = 0; i < n; ++i) m.parts.push_back({std::min(part, total - i * part), {}});
  return m;
}

void choose_tags(Manifest& m, const SlotMap& map) {
  std::vector<uint16_t> serving;  // nodes that serve a slot
  {
    std::vector<bool> seen(map.nodes().size());
    for (uint16_t s = 0; s < cluster::kSlots; ++s) {
      const uint16_t n = map.owner(s);
      if (n != SlotMap::kNone && !seen[n]) seen[n] = true, serving.push_back(n);
    }
  }
  uint64_t x = mix(m.version);
  for (size_t i = 0; i < m.parts.size(); ++i) {
    const bool any = serving.empty();
    const uint16_t want = any ? 0 : serving[(m.version + i) % serving.size()];
    // Random tags until one lands on `want`: about 16384 / (its slots) tries; bounded.
    for (int tries = 0;; ++tries) {
      x = mix(x + 0x9e3779b97f4a7c15ull);
      m.parts[i].tag = hex(x, static_cast<int>(kTagBytes));
      if (any || tries >= (1 << 20) || map.owner(cluster::key_slot(m.parts[i].tag)) == want) break;
    }
  }
}

bool has_magic(std::span<const std::byte> b) {
  return b.size() >= sizeof kMagic && std::memcmp(b.data(), kMagic, sizeof kMagic) == 0;
}

std::string encode(const Manifest& m) {
  std::string out(kMagic, sizeof kMagic);
  put_le(out, m.total, 8);
  put_le(out, m.version, 8);
  put_le(out, m.parts.size(), 4);
  put_le(out, 0, 4);
  for (const Part& p : m.parts) {
    put_le(out, p.length, 8);
    out += p.tag;
    out.resize(out.size() + kTagBytes - p.tag.size(), '\0');
  }
  put_le(out, fnv1a(reinterpret_cast<const std::byte*>(out.data()), out.size()), 8);
  return out;
}

std::optional<Manifest> decode(std::span<const std::byte> b) {
  if (!may_be_manifest(b.size()) || !has_magic(b)) return std::nullopt;
  const size_t n = static_cast<size_t>(get_le(b.data() + 24, 4));
  if (n < 2 || n > kMaxParts || b.size() != manifest_bytes(n) || get_le(b.data() + 28, 4) != 0)
    return std::nullopt;
  const size_t body = b.size() - 8;
  if (get_le(b.data() + body, 8) != fnv1a(b.data(), body)) return std::nullopt;
  Manifest m;
  m.total = get_le(b.data() + 8, 8);
  m.version = get_le(b.data() + 16, 8);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::byte* e = b.data() + kHeaderBytes + i * kPartEntryBytes;
    Part p;
    p.length = get_le(e, 8);
    p.tag.assign(reinterpret_cast<const char*>(e + 8), kTagBytes);
    if (p.tag.find_first_of(std::string_view("{}\0", 3)) != std::string::npos) return std::nullopt;
    // Every part but the last as long as the first; none empty.
    if (p.length == 0 || (i > 0 && i + 1 < n && p.length != m.parts.front().length) ||
        (i + 1 == n && p.length > m.parts.front().length))
      return std::nullopt;
    sum += p.length;
    m.parts.push_back(std::move(p));
  }
  if (sum != m.total) return std::nullopt;
  return m;
}

std::string part_key(std::string_view key, const Manifest& m, size_t i) {
  std::string k;
  k.reserve(key.size() + kTagBytes + 24);
  k += '{';
  k += m.parts[i].tag;
  k += '}';
  k += key;
  k += '#';
  k += hex(m.version, 16);
  k += '#';
  k += std::to_string(i);
  return k;
}

}  // namespace stratakv::detail::stripe
