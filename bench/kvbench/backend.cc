// bench/kvbench/backend.cc - picks the backend of --protocol.
#include "backend.h"

namespace kvbench {

std::unique_ptr<Backend> make_backend(const Options& o, size_t slots, size_t value_bytes) {
  return o.protocol == Protocol::kFast ? make_fast_backend(o, slots, value_bytes)
                                       : make_resp_backend(o, slots, value_bytes);
}

}  // namespace kvbench
