// tiering/value.h - the value handle: reference-counted bytes of one value.
//
// Whoever reads a value (a socket write, a transfer, a demotion) holds a ValueRef; DEL,
// overwrite and expiry only unlink the key, and the bytes are freed when the last reference
// drops (DESIGN.md, "Values, references and leases"). A published value is immutable, except
// by a holder that is provably the only one (use_count() == 1 under the key's shard lock), which
// is how APPEND and SETRANGE grow a value in place.
//
// Allocation is malloc for now; the memory-tier issue moves the bytes into one region carved by
// a jemalloc arena behind this same interface.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace tiering {

/// The bytes of one value: `size()` bytes in use of `capacity()` allocated.
class ValueBuffer {
 public:
  /// Allocates a buffer of `size` bytes in use and at least `capacity` bytes allocated
  /// (capacity >= size). Returns null when memory cannot be had. Thread-safe.
  static std::shared_ptr<ValueBuffer> allocate(size_t size, size_t capacity = 0);
  /// A buffer holding a copy of `bytes`; null when memory cannot be had.
  static std::shared_ptr<ValueBuffer> copy_of(std::string_view bytes);

  ValueBuffer(const ValueBuffer&) = delete;
  ValueBuffer& operator=(const ValueBuffer&) = delete;
  ~ValueBuffer();

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  /// Bytes really allocated for the value (what MEMORY USAGE and used_memory count).
  size_t allocated() const { return allocated_; }
  std::string_view view() const { return {data_, size_}; }
  /// Sets the bytes in use; `n` <= capacity(). Only for the sole holder.
  void resize(size_t n) { size_ = n; }
  /// Whether the value was changed in place (APPEND, SETRANGE): Redis reports such strings as
  /// "raw" whatever their content.
  bool modified() const { return modified_; }
  void set_modified() { modified_ = true; }

  /// Bytes held by all live ValueBuffers in the process. Thread-safe.
  static size_t total_allocated() { return total_allocated_.load(std::memory_order_relaxed); }

 private:
  struct Private {};

 public:
  ValueBuffer(Private, char* data, size_t size, size_t capacity, size_t allocated)
      : data_(data), size_(size), capacity_(capacity), allocated_(allocated) {}

 private:
  char* data_;
  size_t size_;
  size_t capacity_;
  size_t allocated_;
  bool modified_ = false;
  static std::atomic<size_t> total_allocated_;
};

/// A counted reference to a value's bytes.
using ValueRef = std::shared_ptr<ValueBuffer>;

}  // namespace tiering
