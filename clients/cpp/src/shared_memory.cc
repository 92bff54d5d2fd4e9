#include "shared_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "stratakv/error.h"

namespace stratakv::detail {
namespace {

[[noreturn]] void sys_fail(const char* what, size_t size) {
  throw Error(Error::Kind::kConnection, std::string(what) + " of " + std::to_string(size) +
                                            " bytes failed: " + std::strerror(errno));
}

}  // namespace

SharedMemory::SharedMemory(size_t size, const char* name) {
  fd_ = ::memfd_create(name, MFD_CLOEXEC);
  if (fd_ < 0) sys_fail("memfd_create", size);
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    const int e = errno;
    ::close(fd_);
    errno = e;
    sys_fail("ftruncate of a memfd", size);
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd_);
    errno = e;
    sys_fail("mmap of a memfd", size);
  }
  base_ = static_cast<std::byte*>(p);
  size_ = size;
}

SharedMemory::~SharedMemory() {
  if (base_) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void SharedMemory::swap(SharedMemory& o) noexcept {
  std::swap(fd_, o.fd_);
  std::swap(base_, o.base_);
  std::swap(size_, o.size_);
}

std::byte* map_anonymous(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) sys_fail("mmap", size);
  return static_cast<std::byte*>(p);
}

void unmap(std::byte* base, size_t size) {
  if (base) ::munmap(base, size);
}

}  // namespace stratakv::detail
