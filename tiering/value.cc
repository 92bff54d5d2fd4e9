#include "tiering/value.h"

#include <cstring>
#include <new>

#include "tiering/memory_tier.h"

namespace tiering {

size_t Value::allocated() const {
  if (flags_ & kSplit) return MemoryTier::region().usable_size(const_cast<char*>(data())) + kSplitHeaderSize;
  return MemoryTier::region().usable_size(const_cast<Value*>(this));
}

size_t Value::capacity() const {
  if (flags_ & kSplit) return MemoryTier::region().usable_size(const_cast<char*>(data()));
  return allocated() - kHeaderSize;
}

size_t Value::region_offset() const { return MemoryTier::region().offset_of(data()); }

void Value::destroy() noexcept {
  if (flags_ & kSplit) {
    MemoryTier::region().free(split_bytes());
    this->~Value();
    ::operator delete(this);
    return;
  }
  this->~Value();
  MemoryTier::region().free(this);
}

ValueRef ValueRef::allocate(size_t size, size_t capacity) {
  if (capacity < size) capacity = size;
  if (capacity > kMaxSize) return {};
  if (capacity < Value::kSplitThreshold) {
    void* block = MemoryTier::region().allocate(Value::kHeaderSize + capacity);
    if (block == nullptr) return {};
    return adopt(new (block) Value(size));
  }
  void* bytes = MemoryTier::region().allocate(capacity);
  if (bytes == nullptr) return {};
  void* header = ::operator new(Value::kSplitHeaderSize, std::nothrow);
  if (header == nullptr) {
    MemoryTier::region().free(bytes);
    return {};
  }
  Value* v = new (header) Value(size);
  v->flags_ |= Value::kSplit;
  std::memcpy(reinterpret_cast<char*>(v) + Value::kHeaderSize, &bytes, sizeof bytes);
  return adopt(v);
}

ValueRef ValueRef::copy_of(std::string_view bytes) {
  ValueRef v = allocate(bytes.size());
  if (v && !bytes.empty()) std::memcpy(v->data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace tiering
