// tiering/dict.h - a chained hash table in the manner of Redis's dict.c: the keyspace's table.
//
// - Buckets are power-of-two arrays of singly linked chains. A table grows (to twice its size)
//   when its load factor reaches 1 and shrinks (to the smallest power of two >= its size, at
//   least 4) when it falls to 1/8, as Redis 7.4 does.
// - Resizing is incremental: while rehashing there are two tables; each find/insert/erase moves
//   one bucket from the old table to the new one (and rehash_step(n) lets a cron move more), so
//   no single operation pays for a whole resize. New keys go to the new table.
// - scan() is Redis's dictScan: a reverse-binary cursor over the smaller table and, while
//   rehashing, over every expansion of that bucket in the larger one. Every element present
//   from the first call to the last is returned at least once, whatever resizes happen between
//   calls; elements may be returned more than once.
// - Each element is one allocation, a DictNode: chain link, value, 32 bits of hash, key length
//   and the key's bytes inline. Nodes never move (rehashing relinks them), so a Node* or a view
//   of its key stays valid until that node is erased.
//
// Not thread-safe: the keyspace calls every method with the owning shard's mutex held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tiering/dict_node.h"

namespace tiering {

/// A hash table from byte-string keys to V, with Redis's incremental rehashing and SCAN cursor.
/// Requires the owner's lock for every call (it has no locking of its own); const calls never
/// modify anything and may run concurrently with each other.
template <class V>
class Dict {
 public:
  using Node = DictNode<V>;

  Dict() noexcept = default;
  ~Dict() { clear(); }
  Dict(Dict&& o) noexcept { steal(o); }
  Dict& operator=(Dict&& o) noexcept {
    if (this != &o) {
      clear();
      steal(o);
    }
    return *this;
  }
  Dict(const Dict&) = delete;
  Dict& operator=(const Dict&) = delete;

  /// Number of elements.
  size_t size() const noexcept { return t_[0].used + t_[1].used; }
  bool empty() const noexcept { return size() == 0; }
  /// Buckets in both tables (0 before the first insert).
  size_t bucket_count() const noexcept { return t_[0].size + t_[1].size; }
  /// Whether an incremental resize is in progress (two tables).
  bool rehashing() const noexcept { return rehash_idx_ != kNotRehashing; }
  /// Bytes of the bucket arrays (nodes not included).
  size_t bucket_bytes() const noexcept { return bucket_count() * sizeof(Node*); }

  /// The node of `key`, or null. Does one rehash step. `hash` must be hash_key(key).
  Node* find(std::string_view key, uint64_t hash) {
    if (rehashing()) rehash_step(1);
    return lookup(key, hash);
  }
  Node* find(std::string_view key) { return find(key, hash_key(key)); }
  /// The node of `key`, or null, without a rehash step.
  const Node* find(std::string_view key) const { return lookup(key, hash_key(key)); }
  /// 1 if `key` is present, else 0 (std::unordered_map's count).
  size_t count(std::string_view key) const { return find(key) ? 1 : 0; }

  /// The node of `key`, inserting one with a value-initialized V if absent; .second tells
  /// whether it inserted. Does one rehash step and may start a resize. Throws std::bad_alloc,
  /// or std::length_error for a key of 4 GiB or more. `hash` must be hash_key(key).
  std::pair<Node*, bool> try_emplace(std::string_view key, uint64_t hash) {
    if (rehashing()) rehash_step(1);
    if (Node* n = lookup(key, hash)) return {n, false};
    expand_if_needed();
    if (key.size() > std::numeric_limits<uint32_t>::max())
      throw std::length_error("tiering::Dict: key too long");
    void* mem = ::operator new(sizeof(Node) + key.size());
    Node* n = new (mem) Node(static_cast<uint32_t>(hash), key);
    Table& t = t_[rehashing() ? 1 : 0];
    Node*& head = t.buckets[n->hash & (t.size - 1)];
    n->next = head;
    head = n;
    ++t.used;
    return {n, true};
  }
  std::pair<Node*, bool> try_emplace(std::string_view key) { return try_emplace(key, hash_key(key)); }

  /// Removes and destroys `node`, which must be in this dict. Does one rehash step and may
  /// start a shrink.
  void erase(Node* node) {
    if (rehashing()) rehash_step(1);
    for (Table& t : t_) {
      if (t.size == 0) continue;
      for (Node** link = &t.buckets[node->hash & (t.size - 1)]; *link; link = &(*link)->next) {
        if (*link != node) continue;
        *link = node->next;
        --t.used;
        destroy(node);
        shrink_if_needed();
        return;
      }
    }
  }
  /// Removes `key` if present. Returns whether it was.
  bool erase(std::string_view key) {
    Node* n = find(key);
    if (n != nullptr) erase(n);
    return n != nullptr;
  }

  /// Destroys every element and frees the tables.
  void clear() noexcept {
    for (Table& t : t_) {
      for (size_t i = 0; i < t.size && t.used > 0; ++i) {
        for (Node* n = t.buckets[i]; n != nullptr;) {
          Node* next = n->next;
          destroy(n);
          --t.used;
          n = next;
        }
      }
      std::free(t.buckets);
      t = Table{};
    }
    rehash_idx_ = kNotRehashing;
  }

  /// Moves up to `n` buckets of an ongoing resize (visiting at most 10*n empty ones), as
  /// Redis's dictRehash. Returns whether the resize is still in progress.
  bool rehash_step(size_t n) {
    if (!rehashing()) return false;
    size_t empty_visits = n * 10;
    Table &from = t_[0], &to = t_[1];
    const size_t to_mask = to.size - 1;
    while (n-- > 0 && from.used != 0) {
      while (from.buckets[rehash_idx_] == nullptr) {
        ++rehash_idx_;
        if (--empty_visits == 0) return true;
      }
      for (Node* e = from.buckets[rehash_idx_]; e != nullptr;) {
        Node* next = e->next;
        Node*& head = to.buckets[e->hash & to_mask];
        e->next = head;
        head = e;
        --from.used;
        ++to.used;
        e = next;
      }
      from.buckets[rehash_idx_++] = nullptr;
    }
    if (from.used != 0) return true;
    std::free(from.buckets);
    from = to;
    to = Table{};
    rehash_idx_ = kNotRehashing;
    return false;
  }

  /// One step of Redis's dictScan. Start with cursor 0; calls `fn(const Node&)` for every
  /// element of one bucket of the smaller table and of its expansions in the larger; returns
  /// the next cursor, 0 when the scan is complete. Cursors are below the larger table's size.
  template <class Fn>
  uint64_t scan(uint64_t v, Fn&& fn) const {
    if (empty()) return 0;
    const Table* small = &t_[0];
    const Table* large = &t_[1];
    if (!rehashing()) {
      const uint64_t m0 = small->size - 1;
      emit_bucket(*small, v & m0, fn);
      return next_cursor(v, m0);
    }
    if (small->size > large->size) std::swap(small, large);
    const uint64_t m0 = small->size - 1, m1 = large->size - 1;
    emit_bucket(*small, v & m0, fn);
    // The buckets of the larger table that are expansions of the smaller one's bucket v & m0.
    do {
      emit_bucket(*large, v & m1, fn);
      v = next_cursor(v, m1);
    } while (v & (m0 ^ m1));
    return v;
  }

  /// A random element (random non-empty bucket, random position in its chain, as Redis's
  /// dictGetRandomKey), or null when empty. `rng()` must return uniform 64-bit values.
  template <class Rng>
  const Node* random_node(Rng& rng) const {
    if (empty()) return nullptr;
    // Indices [lo, lo + span) over table 0 (from rehash_idx_ on: the rest is empty) then 1.
    const size_t lo = rehashing() ? rehash_idx_ : 0;
    const size_t span = t_[0].size - lo + t_[1].size;
    size_t i = lo + static_cast<size_t>(rng() % span);
    const Node* head = bucket_at(i);
    // A very sparse table (a shrink in progress): stop guessing and walk on from the last guess.
    for (int tries = 0; head == nullptr && tries < 64; ++tries) {
      i = lo + static_cast<size_t>(rng() % span);
      head = bucket_at(i);
    }
    while (head == nullptr) {
      i = i + 1 == lo + span ? lo : i + 1;
      head = bucket_at(i);
    }
    size_t len = 0;
    for (const Node* n = head; n != nullptr; n = n->next) ++len;
    size_t pick = static_cast<size_t>(rng() % len);
    while (pick-- > 0) head = head->next;
    return head;
  }

  /// Forward iteration over every element (table 0, then table 1). Any insert or erase
  /// invalidates iterators (a rehash step may relink the current node).
  template <bool Const>
  class Iter {
   public:
    using value_type = Node;
    using reference = std::conditional_t<Const, const Node&, Node&>;
    using pointer = std::conditional_t<Const, const Node*, Node*>;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::forward_iterator_tag;
    using DictPtr = std::conditional_t<Const, const Dict*, Dict*>;

    Iter() = default;
    Iter(DictPtr d, int table, size_t bucket, Node* node)
        : d_(d), table_(table), bucket_(bucket), node_(node) {}
    reference operator*() const { return *node_; }
    pointer operator->() const { return node_; }
    Iter& operator++() {
      node_ = node_->next;
      if (node_ == nullptr) seek(table_, bucket_ + 1);
      return *this;
    }
    Iter operator++(int) {
      Iter old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iter& o) const { return node_ == o.node_; }

   private:
    friend class Dict;
    // Moves to the first element at or after (table, bucket), or to the end.
    void seek(int table, size_t bucket) {
      for (; table < 2; ++table, bucket = 0) {
        const Table& t = d_->t_[table];
        for (; bucket < t.size; ++bucket) {
          if (t.buckets[bucket] != nullptr) {
            table_ = table;
            bucket_ = bucket;
            node_ = t.buckets[bucket];
            return;
          }
        }
      }
      node_ = nullptr;
    }
    DictPtr d_ = nullptr;
    int table_ = 0;
    size_t bucket_ = 0;
    Node* node_ = nullptr;
  };
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  iterator begin() { return make_begin<iterator>(this); }
  iterator end() { return iterator(); }
  const_iterator begin() const { return make_begin<const_iterator>(this); }
  const_iterator end() const { return const_iterator(); }

 private:
  struct Table {
    Node** buckets = nullptr;  // calloc'ed: a big table's untouched pages stay unbacked
    size_t size = 0;           // 0 or a power of two
    size_t used = 0;
  };
  static constexpr size_t kInitialSize = 4;  // Redis's DICT_HT_INITIAL_SIZE
  static constexpr size_t kShrinkRatio = 8;  // Redis 7.4's HASHTABLE_MIN_FILL
  static constexpr size_t kMaxSize = size_t{1} << 32;  // the node keeps 32 bits of hash
  static constexpr size_t kNotRehashing = std::numeric_limits<size_t>::max();

  static_assert(alignof(V) <= alignof(std::max_align_t), "over-aligned values are unsupported");

  Node* lookup(std::string_view key, uint64_t hash) const {
    const uint32_t h = static_cast<uint32_t>(hash);
    for (int i = 0; i < 2; ++i) {
      const Table& t = t_[i];
      if (t.size == 0) break;
      for (Node* n = t.buckets[h & (t.size - 1)]; n != nullptr; n = n->next) {
        if (n->hash == h && n->first.size() == key.size() &&
            std::memcmp(n->first.data(), key.data(), key.size()) == 0)
          return n;
      }
      if (!rehashing()) break;
    }
    return nullptr;
  }

  // Grows at load factor 1 (Redis's _dictExpandIfNeeded); no new resize while rehashing.
  void expand_if_needed() {
    if (t_[0].size == 0) return resize(kInitialSize);
    if (!rehashing() && t_[0].used >= t_[0].size && t_[0].size < kMaxSize)
      resize(t_[0].size * 2);
  }

  // Shrinks at load factor 1/8 (Redis 7.4's _dictShrinkIfNeeded).
  void shrink_if_needed() {
    if (rehashing() || t_[0].size <= kInitialSize) return;
    if (t_[0].used * kShrinkRatio > t_[0].size) return;
    size_t n = kInitialSize;
    while (n < t_[0].used) n *= 2;
    resize(n);
  }

  // Starts a resize to `n` buckets (a power of two); an empty table is replaced at once.
  void resize(size_t n) {
    auto** b = static_cast<Node**>(std::calloc(n, sizeof(Node*)));
    if (b == nullptr) throw std::bad_alloc();
    if (t_[0].used == 0) {
      std::free(t_[0].buckets);
      t_[0] = Table{b, n, 0};
      return;
    }
    t_[1] = Table{b, n, 0};
    rehash_idx_ = 0;
  }

  const Node* bucket_at(size_t i) const {
    return i < t_[0].size ? t_[0].buckets[i] : t_[1].buckets[i - t_[0].size];
  }

  template <class Fn>
  static void emit_bucket(const Table& t, uint64_t idx, Fn& fn) {
    for (const Node* n = t.buckets[idx]; n != nullptr;) {
      const Node* next = n->next;
      fn(*n);
      n = next;
    }
  }

  // Increments the cursor's masked bits in reverse-binary order (Redis's dictScan).
  static uint64_t next_cursor(uint64_t v, uint64_t mask) {
    v |= ~mask;
    v = reverse_bits(v);
    ++v;
    return reverse_bits(v);
  }
  static uint64_t reverse_bits(uint64_t v) {
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((v & 0x0F0F0F0F0F0F0F0Full) << 4);
    return __builtin_bswap64(v);
  }

  static void destroy(Node* n) noexcept {
    n->~Node();
    ::operator delete(static_cast<void*>(n));
  }

  template <class It, class D>
  static It make_begin(D d) {
    It it(d, 0, 0, nullptr);
    it.seek(0, 0);
    return it;
  }

  void steal(Dict& o) noexcept {
    t_[0] = std::exchange(o.t_[0], Table{});
    t_[1] = std::exchange(o.t_[1], Table{});
    rehash_idx_ = std::exchange(o.rehash_idx_, kNotRehashing);
  }

  Table t_[2];
  size_t rehash_idx_ = kNotRehashing;
};

}  // namespace tiering
