// cluster/etcd_transport.h - internal to cluster_etcd: how one v3 gateway request travels.
// Endpoint order and failover, the auth token, a CURL easy handle set up for one endpoint
// (URL, headers, TLS, timeouts), error replies mapped to EtcdError / EtcdUnavailable, and the
// gateway's encodings (base64, 64-bit integers as strings). EtcdClient's methods are built on
// it (etcd_client.cc, etcd_watch.cc).
//
// Thread-safe: the preferred endpoint and the token sit under a mutex; request() uses the
// calling thread's own easy handle.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cluster/etcd_client.h"

namespace cluster::etcd_detail {

using Json = nlohmann::json;

/// gRPC status codes etcd replies with that the transport acts on.
inline constexpr int kGrpcUnavailable = 14;    // no leader, request timed out, stopping
inline constexpr int kGrpcUnauthenticated = 16;  // invalid auth token

std::string base64_encode(std::string_view bytes);
/// Decodes standard base64 (padding optional); throws EtcdError on invalid input.
std::string base64_decode(std::string_view text);
/// An int64 field of a gateway reply: a JSON string of digits, or a number; 0 when missing.
int64_t int_field(const Json& object, const char* name);
/// The range_end that selects every key starting with `prefix` (clientv3's GetPrefixRangeEnd):
/// the prefix with its last byte below 0xff incremented and what follows it dropped; "\0"
/// (every key from the start key on) when there is no such byte.
std::string prefix_range_end(std::string_view prefix);
/// A mvccpb.KeyValue in gateway JSON.
KeyValue decode_kv(const Json& kv);

/// An error reply: {"error":"text","code":N} (unary) or {"error":{"grpc_code":N,"message":..}}
/// (streams). Sets `code` and `message`; false when `reply` is not an error.
bool error_of(const Json& reply, int& code, std::string& message);

/// The calling thread's CURL easy handle, reset (connections stay cached for reuse).
CURL* thread_easy_handle();

/// One endpoint's answer to one request (no exception thrown for transport failures).
struct Exchange {
  CURLcode curl = CURLE_OK;
  std::string curl_error;  // CURLOPT_ERRORBUFFER or curl_easy_strerror
  bool sent = false;       // any request bytes went out (a retry elsewhere may repeat it)
  long http_status = 0;
  std::string body;
};

class Transport {
 public:
  explicit Transport(EtcdOptions options);

  /// Posts `body` to `path` on the endpoints in turn from the preferred one, authenticating
  /// first when a user is set. Returns the parsed reply. Moves on to the next endpoint on
  /// connection errors and gRPC UNAVAILABLE replies, unless the request may have reached etcd
  /// and `may_repeat` is false (then EtcdUnavailable "outcome unknown"). Re-authenticates once
  /// on an invalid-token reply. Throws EtcdUnavailable when every endpoint failed, EtcdError
  /// for an error reply.
  Json request(std::string_view path, const Json& body, bool may_repeat);

  /// Sets up `h` for a POST of `body` (which must outlive the transfer) to endpoint `index`:
  /// URL, JSON and auth headers (`headers` receives the list to free with curl_slist_free_all),
  /// TLS files, no signals. `timeout_ms` 0 = no overall limit (streams); connecting is always
  /// limited to the options' timeout.
  void setup(CURL* h, size_t index, std::string_view path, const std::string& body,
             const std::string& token, long timeout_ms, curl_slist** headers) const;

  /// The token to send (authenticating at endpoint `index` when there is none yet); "" without
  /// a user, or while etcd says "authentication is not enabled". Throws EtcdUnavailable when
  /// the endpoint does not answer, EtcdError when etcd refuses the credentials.
  std::string token_for(size_t index);
  /// Forgets `token` after etcd called it invalid or asked for one (unless another thread
  /// replaced it already): the next token_for() authenticates again.
  void drop_token(const std::string& token);
  /// An error reply after which authenticating (again) may help: an invalid token, or none
  /// sent to an etcd that has turned authentication on.
  static bool wants_auth(int code, const std::string& message);

  size_t preferred() const;
  void set_preferred(size_t index);
  size_t endpoint_count() const { return options_.endpoints.size(); }
  const std::string& endpoint_url(size_t index) const { return options_.endpoints[index]; }
  const EtcdOptions& options() const { return options_; }

 private:
  Exchange perform(size_t index, std::string_view path, const std::string& body,
                   const std::string& token) const;

  const EtcdOptions options_;
  mutable std::mutex mu_;
  size_t preferred_ = 0;  // under mu_
  std::string token_;     // under mu_
  bool auth_off_ = false;  // under mu_: etcd said authentication is not enabled
};

}  // namespace cluster::etcd_detail

namespace cluster {

/// EtcdClient's state: its transport only.
struct EtcdClient::Impl {
  explicit Impl(EtcdOptions options) : transport(std::move(options)) {}
  etcd_detail::Transport transport;
};

}  // namespace cluster
