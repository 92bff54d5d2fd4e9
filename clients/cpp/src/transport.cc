// transport.cc - making the transport ClientCore chose.
#include "transport.h"

#include <charconv>
#include <string>

namespace stratakv::detail {

std::string window_error(uint64_t window, uint64_t value) {
  return "ERR window of " + std::to_string(window) + " bytes is smaller than the value (" +
         std::to_string(value) + " bytes)";
}

std::optional<uint64_t> window_error_value(std::string_view error) {
  if (!error.starts_with("ERR window of ")) return std::nullopt;
  const size_t open = error.rfind('(');
  if (open == std::string_view::npos) return std::nullopt;
  uint64_t v = 0;
  const char* last = error.data() + error.size();
  auto [end, ec] = std::from_chars(error.data() + open + 1, last, v);
  if (ec != std::errc{} || std::string_view(end, static_cast<size_t>(last - end)) != " bytes)")
    return std::nullopt;
  return v;
}

TransportTraits traits(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kShm:
      return {"shm", true};
    case TransportChoice::kVerbs:
      return {"verbs", false};
    case TransportChoice::kResp:
      break;
  }
  return {"resp", false};
}

std::unique_ptr<Transport> make_transport(TransportChoice choice, Session& s, ClientCore& core) {
  switch (choice) {
    case TransportChoice::kShm:
      return make_shm_transport(s, core);
    case TransportChoice::kVerbs:
      return make_verbs_transport(s, core);
    case TransportChoice::kResp:
      break;
  }
  return make_resp_transport(s);
}

}  // namespace stratakv::detail
