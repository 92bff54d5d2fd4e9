// bench/kvbench/backend.cc - picks the backend of --protocol.
#include "backend.h"

#include "net.h"

namespace kvbench {

#ifndef KVBENCH_HAVE_SDK
// bench/ configured on its own has no SDK (clients/cpp): --protocol fast fails at connect.
std::unique_ptr<Backend> make_sdk_backend(const Options&, size_t, size_t) {
  throw IoError("--protocol fast needs the C++ SDK, not in this build (bench/ configured on its own); "
                "use --protocol fast-raw");
}
#endif

std::unique_ptr<Backend> make_backend(const Options& o, size_t slots, size_t value_bytes) {
  switch (o.protocol) {
    case Protocol::kFast: return make_sdk_backend(o, slots, value_bytes);
    case Protocol::kFastRaw: return make_fast_backend(o, slots, value_bytes);
    case Protocol::kResp: break;
  }
  return make_resp_backend(o, slots, value_bytes);
}

}  // namespace kvbench
