// shm_transport.cc - same-host fast path (docs/fast-path.md): segments are memfds passed over
// the Unix socket (KV.REGISTER SHM) that the server maps; the rest is segment_transport.cc.
#include "core.h"
#include "segment_transport.h"
#include "shared_memory.h"

namespace stratakv::detail {
namespace {

struct ShmStaging final : Staging {
  SharedMemory mem;
};

class ShmBackend final : public SegmentBackend {
 public:
  explicit ShmBackend(Session& s) : s_(s) {}
  std::string_view name() const override { return "shm"; }

  uint64_t register_segment(const BufferState& b) override { return register_fd(b.fd, b.size); }

  std::unique_ptr<Staging> make_staging(size_t size) override {
    auto st = std::make_unique<ShmStaging>();
    st->mem = SharedMemory(size, "stratakv-staging");
    st->seg = register_fd(st->mem.fd(), size);
    st->data = st->mem.data();
    st->size = size;
    return st;
  }

 private:
  uint64_t register_fd(int fd, uint64_t length) {
    Args a{"KV.REGISTER", "SHM"};
    a.add(length);
    return segment_id(s_, s_.call_with_fd(a, fd));
  }

  Session& s_;
};

}  // namespace

std::unique_ptr<Transport> make_shm_transport(Session& s, ClientCore& core) {
  if (!s.is_unix()) throw Error(Error::Kind::kUsage, "the shm transport needs a unix:// URL");
  return make_segment_transport(s, core, std::make_unique<ShmBackend>(s));
}

}  // namespace stratakv::detail
