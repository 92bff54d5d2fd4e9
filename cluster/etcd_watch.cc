// cluster/etcd_watch.cc - EtcdClient::watch: one long-lived streaming POST to /v3/watch per
// call (cluster/etcd_client.h). The gateway answers with a stream of JSON objects
// {"result": WatchResponse} (or {"error": {...}}), split by JsonStream whatever the chunking.
//
// The transfer runs in a curl multi handle of its own so that a stop request wakes its poll at
// once (curl_multi_wakeup from a std::stop_callback). The request carries gRPC metadata
// "hasleader: true" (as clientv3's WithRequireLeader), so etcd ends the watch with UNAVAILABLE
// when its member loses the cluster's leader instead of going silent.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/etcd_transport.h"
#include "cluster/json_stream.h"

namespace cluster {

using etcd_detail::base64_encode;
using etcd_detail::decode_kv;
using etcd_detail::int_field;
using etcd_detail::Json;

namespace {

// Idle streams are probed: first probe after 5 s, then every 3 s (Linux sends 9).
constexpr long kKeepIdleS = 5, kKeepIntervalS = 3;

// etcd refused the token or asked for one: authenticate again and reconnect.
struct InvalidToken {
  int code;
  std::string message;
};

size_t append_to_string(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// The transfer's handles, freed on every way out.
struct Stream {
  CURL* easy = curl_easy_init();
  CURLM* multi = curl_multi_init();
  curl_slist* headers = nullptr;
  bool added = false;
  ~Stream() {
    if (added) curl_multi_remove_handle(multi, easy);
    curl_multi_cleanup(multi);
    curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
};

// Acts on one object of the stream: events go to `on_event`; a cancel or an error throws.
void handle(const std::string& text, const std::string& where,
            const std::function<void(const WatchEvent&)>& on_event) {
  const Json message = Json::parse(text, nullptr, false);
  if (message.is_discarded()) throw EtcdUnavailable(where + ": watch stream: not JSON: " + text.substr(0, 200));
  int code = 0;
  std::string error;
  if (etcd_detail::error_of(message, code, error)) {
    if (etcd_detail::Transport::wants_auth(code, error)) throw InvalidToken{code, error};
    if (code == etcd_detail::kGrpcUnavailable) throw EtcdUnavailable(where + ": " + error);
    throw EtcdError(error, code);
  }
  auto result = message.find("result");
  if (result == message.end() || !result->is_object()) return;
  if (result->value("canceled", false)) {
    if (const int64_t compacted = int_field(*result, "compact_revision"); compacted > 0)
      throw EtcdCompacted("etcd watch: revision compacted; the oldest kept is " + std::to_string(compacted),
                          compacted);
    throw EtcdError("etcd watch canceled: " + result->value("cancel_reason", std::string("no reason given")), 0);
  }
  auto events = result->find("events");
  if (events == result->end() || !events->is_array()) return;
  for (const Json& e : *events) {
    WatchEvent event;
    event.type = e.value("type", std::string("PUT")) == "DELETE" ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
    if (auto kv = e.find("kv"); kv != e.end() && kv->is_object()) event.kv = decode_kv(*kv);
    on_event(event);
  }
}

}  // namespace

void EtcdClient::watch(std::string_view key, int64_t start_revision,
                       const std::function<void(const WatchEvent&)>& on_event, std::stop_token stop) {
  watch_range(key, "", start_revision, on_event, std::move(stop));
}

void EtcdClient::watch_prefix(std::string_view prefix, int64_t start_revision,
                              const std::function<void(const WatchEvent&)>& on_event, std::stop_token stop) {
  const std::string key = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  watch_range(key, etcd_detail::prefix_range_end(prefix), start_revision, on_event, std::move(stop));
}

void EtcdClient::watch_range(std::string_view key, std::string_view range_end, int64_t start_revision,
                             const std::function<void(const WatchEvent&)>& on_event, std::stop_token stop) {
  etcd_detail::Transport& transport = impl_->transport;
  Json create = {{"key", base64_encode(key)}};
  if (!range_end.empty()) create["range_end"] = base64_encode(range_end);
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  const std::string body = Json{{"create_request", create}}.dump();

  std::string failures;
  const size_t n = transport.endpoint_count(), first = transport.preferred();
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (first + i) % n;
    const std::string where = transport.endpoint_url(index) + "/v3/watch";
    for (int attempt = 0;; ++attempt) {  // a second attempt only after re-authenticating
      if (stop.stop_requested()) return;
      std::string token;
      try {
        token = transport.token_for(index);
      } catch (const EtcdUnavailable& e) {
        failures += std::string("; ") + e.what();
        break;
      }
      Stream s;
      if (!s.easy || !s.multi) throw EtcdUnavailable("curl: cannot create a handle");
      transport.setup(s.easy, index, "/v3/watch", body, token, 0, &s.headers);
      s.headers = curl_slist_append(s.headers, "Grpc-Metadata-hasleader: true");
      curl_easy_setopt(s.easy, CURLOPT_HTTPHEADER, s.headers);
      std::string received;
      curl_easy_setopt(s.easy, CURLOPT_WRITEFUNCTION, append_to_string);
      curl_easy_setopt(s.easy, CURLOPT_WRITEDATA, &received);
      char error[CURL_ERROR_SIZE] = "";
      curl_easy_setopt(s.easy, CURLOPT_ERRORBUFFER, error);
      curl_easy_setopt(s.easy, CURLOPT_TCP_KEEPALIVE, 1L);
      curl_easy_setopt(s.easy, CURLOPT_TCP_KEEPIDLE, kKeepIdleS);
      curl_easy_setopt(s.easy, CURLOPT_TCP_KEEPINTVL, kKeepIntervalS);
      curl_multi_add_handle(s.multi, s.easy);
      s.added = true;
      std::stop_callback wake(stop, [&s] { curl_multi_wakeup(s.multi); });

      JsonStream splitter;
      std::vector<std::string> objects;
      bool answered = false;  // etcd sent something: stay on this endpoint
      std::optional<InvalidToken> reauth;
      CURLcode result = CURLE_OK;
      for (;;) {
        int running = 0;
        curl_multi_perform(s.multi, &running);
        if (!received.empty()) {
          answered = true;
          splitter.feed(received, objects);
          received.clear();
          try {
            for (const std::string& o : objects) handle(o, where, on_event);
          } catch (const InvalidToken& e) {
            reauth = e;
          }
          objects.clear();
          if (reauth) break;
          transport.set_preferred(index);
        }
        if (stop.stop_requested()) return;
        if (running == 0) {
          int queued = 0;
          if (CURLMsg* m = curl_multi_info_read(s.multi, &queued); m && m->msg == CURLMSG_DONE)
            result = m->data.result;
          break;
        }
        curl_multi_poll(s.multi, nullptr, 0, 1000, nullptr);
      }
      if (reauth && attempt == 0 && !transport.options().user.empty()) {
        transport.drop_token(token);
        continue;
      }
      long status = 0;
      curl_easy_getinfo(s.easy, CURLINFO_RESPONSE_CODE, &status);
      if (reauth) throw EtcdError(reauth->message, reauth->code);
      const std::string why = error[0] ? error : curl_easy_strerror(result);
      if (!answered && result != CURLE_OK) {  // never reached etcd: try the next endpoint
        failures += "; " + where + ": " + why;
        break;
      }
      if (result != CURLE_OK) throw EtcdUnavailable(where + ": watch stream broke: " + why);
      throw EtcdUnavailable(where + ": watch stream ended (HTTP " + std::to_string(status) + ")");
    }
  }
  throw EtcdUnavailable("etcd unavailable: " + failures.substr(failures.empty() ? 0 : 2));
}

}  // namespace cluster
