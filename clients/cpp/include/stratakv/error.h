// stratakv/error.h - the one exception type of libstratakv.
#pragma once

#include <stdexcept>
#include <string>

namespace stratakv {

/// Thrown by every libstratakv call that fails as a whole. Per-key failures of a batch are
/// not thrown: they come back in that key's `Result` (see client.h).
class Error : public std::runtime_error {
 public:
  enum class Kind {
    kServer,      ///< the server replied an error; what() is its exact text ("ERR ...", "OOM ...")
    kConnection,  ///< connect, send or receive failed, or timed out; the connection is dropped
    kProtocol,    ///< the server's reply was not what the command promises
    kUsage,       ///< a bad argument (URL, buffer, option) caught before anything was sent
  };

  Error(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}

  Kind kind() const noexcept { return kind_; }
  /// True when the server replied this error (what() is then the server's text).
  bool is_server_error() const noexcept { return kind_ == Kind::kServer; }

 private:
  Kind kind_;
};

}  // namespace stratakv
