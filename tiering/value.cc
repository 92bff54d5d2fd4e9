#include "tiering/value.h"

#include <cstring>
#include <new>

#include "tiering/memory_tier.h"

namespace tiering {

size_t Value::allocated() const {
  return MemoryTier::region().usable_size(const_cast<Value*>(this));
}

size_t Value::capacity() const { return allocated() - kHeaderSize; }

size_t Value::region_offset() const { return MemoryTier::region().offset_of(data()); }

void Value::destroy() noexcept {
  this->~Value();
  MemoryTier::region().free(this);
}

ValueRef ValueRef::allocate(size_t size, size_t capacity) {
  if (capacity < size) capacity = size;
  if (capacity > kMaxSize) return {};
  void* block = MemoryTier::region().allocate(Value::kHeaderSize + capacity);
  if (block == nullptr) return {};
  return adopt(new (block) Value(size));
}

ValueRef ValueRef::copy_of(std::string_view bytes) {
  ValueRef v = allocate(bytes.size());
  if (v && !bytes.empty()) std::memcpy(v->data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace tiering
