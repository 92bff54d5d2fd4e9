// tiering/value.h - a value: one block in the memory region, and the counted handle to it.
//
// Whoever reads a value (a socket write, a transfer, a demotion) holds a ValueRef; DEL,
// overwrite and expiry only unlink the key, and the bytes go back to the region when the last
// reference drops (DESIGN.md, "Values, references and leases"). A published value is
// immutable, except by a holder that is provably the only one (use_count() == 1 under the key's
// shard lock), which is how APPEND and SETRANGE grow a value in place.
//
// Layout: a small value (below kSplitThreshold) is one block of the process's MemoryRegion
// (memory_tier.h): a 16-byte header (reference count, flags, size) and the bytes right after
// it. The header holds no capacity: the block's usable size says it (capacity(), allocated()),
// which keeps a 100-byte value in jemalloc's 128-byte class instead of the 160-byte one.
// A larger value keeps its header (and a pointer to its bytes) in a 32-byte heap block and its
// bytes alone in the region: a 4 KiB value then fills a 4 KiB block rather than a 5 KiB one,
// and a 1 MiB or 32 MiB value exactly its pages, page-aligned (what RDMA prefers). Either way
// data() is 16-byte aligned and any value is (region_offset(), size()) inside the one region.
//
// A ValueRef is one pointer (8 bytes): copying it is an atomic increment, moving it is free,
// and destroying the last one frees the block(s).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

namespace tiering {

class ValueRef;

/// The header of a value, followed in its region block by the value's bytes. Reached through
/// a ValueRef (`ref->size()`); never constructed, copied or destroyed directly.
class Value {
 public:
  /// Bytes of the header (before data() in the block of a small value).
  static constexpr size_t kHeaderSize = 16;
  /// Values whose capacity is at least this many bytes keep the header on the heap, apart
  /// from their bytes (see the layout above).
  static constexpr size_t kSplitThreshold = 1024;
  /// The heap block of a split value's header: the header and the bytes' address.
  static constexpr size_t kSplitHeaderSize = kHeaderSize + sizeof(char*);
  /// Region bytes a value of `capacity` needs beyond its capacity (the inline header or 0).
  static constexpr size_t region_overhead(size_t capacity) {
    return capacity >= kSplitThreshold ? 0 : kHeaderSize;
  }

  char* data() noexcept {
    return (flags_ & kSplit) ? split_bytes() : reinterpret_cast<char*>(this) + kHeaderSize;
  }
  const char* data() const noexcept { return const_cast<Value*>(this)->data(); }
  /// Bytes in use.
  size_t size() const noexcept { return size_; }
  std::string_view view() const noexcept { return {data(), size_}; }
  /// Bytes data() may hold (>= size()): the block's usable size less the header. Costs an
  /// allocator lookup (tens of ns): for APPEND/SETRANGE, not per read.
  size_t capacity() const;
  /// Bytes the value really takes: its region block's usable size, with the header (inline,
  /// or its heap block when split): what MEMORY USAGE and eviction count. Same cost as
  /// capacity().
  size_t allocated() const;
  /// Offset of data() from the region's base (for rdma/: the value is (offset, size()) in the
  /// region registered once).
  size_t region_offset() const;

  /// Sets the bytes in use; `n` <= capacity(). Only for the sole holder (use_count() == 1 under
  /// the shard lock) or before the value is shared.
  void resize(size_t n) noexcept { size_ = n; }
  /// Whether the value was changed in place (APPEND, SETRANGE): Redis reports such strings as
  /// "raw" whatever their content.
  bool modified() const noexcept { return (flags_ & kModified) != 0; }
  void set_modified() noexcept { flags_ |= kModified; }

  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

 private:
  friend class ValueRef;
  static constexpr uint32_t kModified = 1;
  static constexpr uint32_t kSplit = 2;  // header on the heap, bytes at split_bytes()

  char* split_bytes() noexcept {
    char* p;
    __builtin_memcpy(&p, reinterpret_cast<char*>(this) + kHeaderSize, sizeof p);
    return p;
  }

  explicit Value(size_t size) noexcept : refs_(1), flags_(0), size_(size) {}
  ~Value() = default;

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  // acq_rel: every holder's reads of the bytes happen before the block is freed or reused.
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }
  void destroy() noexcept;  // value.cc: gives the block back to the region

  std::atomic<uint32_t> refs_;
  uint32_t flags_;
  uint64_t size_;
};
static_assert(sizeof(Value) == Value::kHeaderSize, "the header must be exactly 16 bytes");

/// A counted reference to a Value; null or one reference. Thread-safe as std::shared_ptr is:
/// distinct ValueRefs to one value may be copied and destroyed from any threads at once; one
/// ValueRef object must not be written by two threads at once.
class ValueRef {
 public:
  /// The largest size allocate() accepts (more would overflow the block size).
  static constexpr size_t kMaxSize = (size_t{1} << 48);

  constexpr ValueRef() noexcept = default;
  constexpr ValueRef(std::nullptr_t) noexcept {}
  ValueRef(const ValueRef& o) noexcept : v_(o.v_) {
    if (v_ != nullptr) v_->retain();
  }
  ValueRef(ValueRef&& o) noexcept : v_(std::exchange(o.v_, nullptr)) {}
  ValueRef& operator=(const ValueRef& o) noexcept {
    ValueRef(o).swap(*this);
    return *this;
  }
  ValueRef& operator=(ValueRef&& o) noexcept {
    ValueRef(std::move(o)).swap(*this);  // the old value is released after the swap
    return *this;
  }
  ~ValueRef() {
    if (v_ != nullptr) v_->release();
  }

  /// A new value of `size` bytes in use and room for at least `capacity` (capacity >= size;
  /// the bytes are uninitialised), in the process's memory region. Null when the region cannot
  /// fit it: the caller decides what a full region means (server: Server::allocate_value, the
  /// one place that handles it). Never allocates outside the region. Thread-safe.
  static ValueRef allocate(size_t size, size_t capacity = 0);
  /// A new value holding a copy of `bytes`; null when the region cannot fit it.
  static ValueRef copy_of(std::string_view bytes);

  Value* get() const noexcept { return v_; }
  Value* operator->() const noexcept { return v_; }
  Value& operator*() const noexcept { return *v_; }
  explicit operator bool() const noexcept { return v_ != nullptr; }
  friend bool operator==(const ValueRef& a, const ValueRef& b) noexcept { return a.v_ == b.v_; }
  friend bool operator==(const ValueRef& a, std::nullptr_t) noexcept { return a.v_ == nullptr; }

  /// References to this value (0 for null). Exact when 1 under a lock that every way of taking
  /// a new reference goes through (the shard lock): then this holder is the only one, and no
  /// other thread can still be reading the bytes (acquire pairs with their release).
  uint32_t use_count() const noexcept {
    return v_ != nullptr ? v_->refs_.load(std::memory_order_acquire) : 0;
  }
  /// Drops the reference (the block is freed if it was the last).
  void reset() noexcept { ValueRef().swap(*this); }
  void swap(ValueRef& o) noexcept { std::swap(v_, o.v_); }

  /// Gives up this reference without dropping it: the caller now owns one count of the value
  /// and must hand it back to adopt() or release_detached(). For type-erased holders
  /// (resp::Keepalive), so they need no allocation of their own.
  Value* detach() noexcept { return std::exchange(v_, nullptr); }
  /// Takes over a reference given up by detach().
  static ValueRef adopt(Value* v) noexcept {
    ValueRef r;
    r.v_ = v;
    return r;
  }
  /// Another reference to `v`, a value some holder keeps alive (e.g. a detached reference).
  static ValueRef share(Value* v) noexcept {
    if (v != nullptr) v->retain();
    return adopt(v);
  }
  /// Drops a reference given up by detach(); `v` is a Value* (void* to serve as a callback).
  static void release_detached(void* v) noexcept {
    if (v != nullptr) static_cast<Value*>(v)->release();
  }

 private:
  Value* v_ = nullptr;
};
static_assert(sizeof(ValueRef) == sizeof(void*), "a ValueRef is one pointer");

}  // namespace tiering
