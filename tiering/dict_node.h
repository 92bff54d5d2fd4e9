// tiering/dict_node.h - the element of a tiering::Dict (dict.h) and the key hash.
//
// A DictNode is one allocation: chain link, value, 32 bits of the key's hash, the key's length
// and then the key's bytes. It names its key `first` and its value `second`, as std::pair does,
// so code written against std::unordered_map<std::string, V>::value_type reads the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>  // Debian libxxhash-dev; header-only use

namespace tiering {

/// The 64-bit hash of a key (XXH3). The keyspace takes its shard from the high bits; a Dict
/// takes its bucket from the low 32. Pure, thread-safe.
inline uint64_t hash_key(std::string_view key) noexcept {
  return XXH3_64bits(key.data(), key.size());
}

template <class V> struct DictNode;
template <class V> class Dict;

/// The key of a DictNode: its length, with its bytes following it inside the node's allocation.
/// Not copyable (a copy would lose the bytes); read it through view() or a conversion. It is
/// named `first` in the node, and converts to std::string, for source compatibility with the
/// std::pair<const std::string, Entry> the keyspace used to store.
class DictKey {
 public:
  DictKey(const DictKey&) = delete;
  DictKey& operator=(const DictKey&) = delete;

  std::string_view view() const noexcept { return {bytes_, size_}; }
  const char* data() const noexcept { return bytes_; }
  size_t size() const noexcept { return size_; }
  operator std::string_view() const noexcept { return view(); }
  /// A copy of the key (allocates unless short).
  operator std::string() const { return std::string(view()); }
  friend bool operator==(const DictKey& a, std::string_view b) noexcept { return a.view() == b; }
  friend auto operator<=>(const DictKey& a, std::string_view b) noexcept { return a.view() <=> b; }

 private:
  template <class> friend struct DictNode;
  explicit DictKey(uint32_t size) noexcept : size_(size) {}
  uint32_t size_;
  char bytes_[];  // GNU flexible array member: the key, allocated with the node
};

/// One element of a Dict: `first` is the key, `second` the value (the names std::pair uses),
/// also reachable as key() and entry(). Binds as `auto& [key, value] = node`.
template <class V>
struct DictNode {
  DictNode* next;  ///< the bucket chain (owned by the Dict)
  V second;        ///< the value
  uint32_t hash;   ///< low 32 bits of hash_key(key): the bucket in any table of up to 2^32
  DictKey first;   ///< the key; its bytes follow in the same allocation

  std::string_view key() const noexcept { return first.view(); }
  V& entry() noexcept { return second; }
  const V& entry() const noexcept { return second; }

  template <size_t I> auto& get() noexcept {
    if constexpr (I == 0) return std::as_const(first);
    else return second;
  }
  template <size_t I> const auto& get() const noexcept {
    if constexpr (I == 0) return first;
    else return second;
  }

 private:
  friend class Dict<V>;
  DictNode(uint32_t h, std::string_view key) : next(nullptr), second(), hash(h),
                                               first(static_cast<uint32_t>(key.size())) {
    if (!key.empty()) std::memcpy(first.bytes_, key.data(), key.size());
  }
  ~DictNode() = default;
  DictNode(const DictNode&) = delete;
  DictNode& operator=(const DictNode&) = delete;
};

}  // namespace tiering

// Structured bindings: `for (const auto& [key, value] : dict)`.
template <class V>
struct std::tuple_size<tiering::DictNode<V>> : std::integral_constant<size_t, 2> {};
template <class V>
struct std::tuple_element<0, tiering::DictNode<V>> { using type = const tiering::DictKey; };
template <class V>
struct std::tuple_element<1, tiering::DictNode<V>> { using type = V; };
