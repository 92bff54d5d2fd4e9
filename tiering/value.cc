#include "tiering/value.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace tiering {

std::atomic<size_t> ValueBuffer::total_allocated_{0};

std::shared_ptr<ValueBuffer> ValueBuffer::allocate(size_t size, size_t capacity) {
  if (capacity < size) capacity = size;
  char* data = static_cast<char*>(std::malloc(capacity ? capacity : 1));
  if (data == nullptr) return nullptr;
  size_t allocated = malloc_usable_size(data);
  total_allocated_.fetch_add(allocated, std::memory_order_relaxed);
  return std::make_shared<ValueBuffer>(Private{}, data, size, allocated, allocated);
}

std::shared_ptr<ValueBuffer> ValueBuffer::copy_of(std::string_view bytes) {
  auto v = allocate(bytes.size());
  if (v && !bytes.empty()) std::memcpy(v->data(), bytes.data(), bytes.size());
  return v;
}

ValueBuffer::~ValueBuffer() {
  total_allocated_.fetch_sub(allocated_, std::memory_order_relaxed);
  std::free(data_);
}

}  // namespace tiering
