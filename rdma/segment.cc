#include "rdma/segment.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace rdma {

namespace {
std::atomic<uint64_t> next_id{1};
std::atomic<uint64_t> live{0};
std::atomic<uint64_t> live_bytes_total{0};
}  // namespace

SegmentTable::~SegmentTable() {
  while (!segments_.empty()) remove(segments_.begin()->first);
}

uint64_t SegmentTable::add_shm(int fd, uint64_t length, std::string& error) {
  struct stat st {};
  void* base = MAP_FAILED;
  if (length == 0) {
    error = "ERR segment length must be positive";
  } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "ERR the passed file descriptor is not a shared memory file";
  } else if (static_cast<uint64_t>(st.st_size) < length) {
    error = "ERR segment length " + std::to_string(length) + " exceeds the shared memory file (" +
            std::to_string(st.st_size) + " bytes)";
  } else {
    base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) error = std::string("ERR cannot map the segment: ") + strerror(errno);
  }
  close(fd);
  if (base == MAP_FAILED) return 0;
  Segment s;
  s.kind = SegmentKind::kShm;
  s.base = static_cast<std::byte*>(base);
  s.length = length;
  return add(s);
}

uint64_t SegmentTable::add_verbs(uint64_t remote_addr, uint64_t length, uint32_t rkey) {
  Segment s;
  s.kind = SegmentKind::kVerbs;
  s.length = length;
  s.remote_addr = remote_addr;
  s.rkey = rkey;
  return add(s);
}

uint64_t SegmentTable::add(Segment s) {
  s.id = next_id.fetch_add(1, std::memory_order_relaxed);
  segments_.emplace(s.id, s);
  bytes_ += s.length;
  live.fetch_add(1, std::memory_order_relaxed);
  live_bytes_total.fetch_add(s.length, std::memory_order_relaxed);
  return s.id;
}

bool SegmentTable::remove(uint64_t id) {
  auto it = segments_.find(id);
  if (it == segments_.end()) return false;
  if (it->second.kind == SegmentKind::kShm) munmap(it->second.base, it->second.length);
  bytes_ -= it->second.length;
  live_bytes_total.fetch_sub(it->second.length, std::memory_order_relaxed);
  segments_.erase(it);
  live.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

const Segment* SegmentTable::find(uint64_t id) const {
  auto it = segments_.find(id);
  return it == segments_.end() ? nullptr : &it->second;
}

const Segment* SegmentTable::check(const Descriptor& d, SegmentKind kind,
                                   std::string& error) const {
  const Segment* s = find(d.segment);
  if (s == nullptr) {
    error = "ERR segment " + std::to_string(d.segment) + " is not registered on this connection";
    return nullptr;
  }
  if (s->kind != kind) {
    error = "ERR segment " + std::to_string(d.segment) + " is not " +
            (kind == SegmentKind::kShm ? "a shared memory" : "an RDMA") + " segment";
    return nullptr;
  }
  if (d.length == 0 || d.offset > s->length || d.length > s->length - d.offset) {
    error = "ERR descriptor (" + std::to_string(d.segment) + " " + std::to_string(d.offset) +
            " " + std::to_string(d.length) + ") is outside its segment of " +
            std::to_string(s->length) + " bytes";
    return nullptr;
  }
  return s;
}

bool SegmentTable::resolve(std::span<const Descriptor> sgl, std::vector<iovec>& out,
                           uint64_t& total, std::string& error) const {
  out.clear();
  out.reserve(sgl.size());
  total = 0;
  for (const Descriptor& d : sgl) {
    const Segment* s = check(d, SegmentKind::kShm, error);
    if (s == nullptr) return false;
    if (!add_length(total, d.length, error)) return false;
    out.push_back({s->base + d.offset, d.length});
  }
  return true;
}

bool add_length(uint64_t& total, uint64_t length, std::string& error) {
  if (__builtin_add_overflow(total, length, &total)) {
    error = "ERR scatter-gather list is longer than 2^64-1 bytes";
    return false;
  }
  return true;
}

uint64_t SegmentTable::live_segments() { return live.load(std::memory_order_relaxed); }
uint64_t SegmentTable::live_bytes() { return live_bytes_total.load(std::memory_order_relaxed); }

void scatter(std::span<const std::byte> src, std::span<const iovec> dst) {
  size_t at = 0;
  for (const iovec& v : dst) {
    const size_t n = std::min(v.iov_len, src.size() - at);
    if (n == 0) break;
    std::memcpy(v.iov_base, src.data() + at, n);
    at += n;
  }
}

void gather(std::span<const iovec> src, std::span<std::byte> dst) {
  size_t at = 0;
  for (const iovec& v : src) {
    std::memcpy(dst.data() + at, v.iov_base, v.iov_len);
    at += v.iov_len;
  }
}

}  // namespace rdma
