// shared_memory.h - memory the server can map: a memfd and this process's mapping of it.
#pragma once

#include <cstddef>
#include <utility>

namespace stratakv::detail {

/// Owns a memfd of `size` bytes and a MAP_SHARED read/write mapping of it (zero-filled, pages
/// allocated on first touch). Movable, not copyable.
class SharedMemory {
 public:
  SharedMemory() = default;
  /// Creates it. Throws Error(kConnection) when memfd_create, ftruncate or mmap fail.
  SharedMemory(size_t size, const char* name);
  ~SharedMemory();
  SharedMemory(SharedMemory&& o) noexcept { swap(o); }
  SharedMemory& operator=(SharedMemory&& o) noexcept {
    SharedMemory tmp(std::move(o));
    swap(tmp);
    return *this;
  }

  int fd() const { return fd_; }
  std::byte* data() const { return base_; }
  size_t size() const { return size_; }
  /// Gives up ownership (the caller closes the fd and unmaps).
  void release() { fd_ = -1, base_ = nullptr, size_ = 0; }

 private:
  void swap(SharedMemory& o) noexcept;
  int fd_ = -1;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

/// Anonymous private memory of `size` bytes (zero-filled), for buffers that are not shared.
std::byte* map_anonymous(size_t size);
void unmap(std::byte* base, size_t size);

}  // namespace stratakv::detail
