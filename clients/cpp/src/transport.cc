// transport.cc - choosing a transport (the seam where verbs will be added).
#include "transport.h"

#include <string>

namespace stratakv::detail {

std::string window_error(uint64_t window, uint64_t value) {
  return "ERR window of " + std::to_string(window) + " bytes is smaller than the value (" +
         std::to_string(value) + " bytes)";
}

TransportTraits traits(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kShm:
      return {"shm", true};
    case TransportChoice::kResp:
      break;
  }
  return {"resp", false};
}

std::unique_ptr<Transport> make_transport(TransportChoice choice, Session& s, ClientCore& core) {
  switch (choice) {
    case TransportChoice::kShm:
      return make_shm_transport(s, core);
    case TransportChoice::kResp:
      break;
  }
  return make_resp_transport(s);
}

}  // namespace stratakv::detail
