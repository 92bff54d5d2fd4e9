// cluster/etcd_transport.cc - Transport and the gateway's encodings (cluster/etcd_transport.h).
#include "cluster/etcd_transport.h"

#include <array>
#include <cstdlib>
#include <utility>

namespace cluster::etcd_detail {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t append_to_string(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// The first bytes of a reply, for messages.
std::string excerpt(const std::string& body) {
  return body.size() <= 200 ? body : body.substr(0, 200) + "...";
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += {kBase64[v >> 18], kBase64[(v >> 12) & 63], kBase64[(v >> 6) & 63], kBase64[v & 63]};
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (rest == 2 ? uint8_t(bytes[i + 1]) << 8 : 0);
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += rest == 2 ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kBase64[i])] = static_cast<int8_t>(i);
    return t;
  }();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int8_t v = kValue[static_cast<uint8_t>(c)];
    if (v < 0) throw EtcdError("etcd reply: invalid base64", 0);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (bits >= 6) throw EtcdError("etcd reply: truncated base64", 0);
  return out;
}

int64_t int_field(const Json& object, const char* name) {
  if (!object.is_object()) return 0;
  auto it = object.find(name);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size()) return v;
  }
  throw EtcdError(std::string("etcd reply: field ") + name + " is not an integer", 0);
}

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<uint8_t>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
  return end;
}

KeyValue decode_kv(const Json& kv) {
  KeyValue out;
  if (auto it = kv.find("key"); it != kv.end() && it->is_string()) out.key = base64_decode(it->get<std::string>());
  if (auto it = kv.find("value"); it != kv.end() && it->is_string()) out.value = base64_decode(it->get<std::string>());
  out.create_revision = int_field(kv, "create_revision");
  out.mod_revision = int_field(kv, "mod_revision");
  out.version = int_field(kv, "version");
  out.lease = int_field(kv, "lease");
  return out;
}

bool error_of(const Json& reply, int& code, std::string& message) {
  if (!reply.is_object()) return false;
  auto it = reply.find("error");
  if (it == reply.end()) return false;
  if (it->is_string()) {  // unary: {"error": "...", "message": "...", "code": N}
    message = it->get<std::string>();
    if (message.empty()) return false;
    code = static_cast<int>(int_field(reply, "code"));
    return true;
  }
  if (it->is_object()) {  // stream: {"error": {"grpc_code": N, "http_code": N, "message": "..."}}
    code = static_cast<int>(int_field(*it, "grpc_code"));
    auto m = it->find("message");
    message = m != it->end() && m->is_string() ? m->get<std::string>() : it->dump();
    return true;
  }
  return false;
}

CURL* thread_easy_handle() {
  struct Handle {
    CURL* h = curl_easy_init();
    ~Handle() { curl_easy_cleanup(h); }
  };
  thread_local Handle handle;
  if (!handle.h) throw EtcdUnavailable("curl_easy_init failed");
  curl_easy_reset(handle.h);
  return handle.h;
}

Transport::Transport(EtcdOptions options) : options_(std::move(options)) {
  if (options_.endpoints.empty()) throw std::invalid_argument("EtcdOptions: no endpoints");
  global_init();
}

size_t Transport::preferred() const {
  std::lock_guard lock(mu_);
  return preferred_;
}

void Transport::set_preferred(size_t index) {
  std::lock_guard lock(mu_);
  preferred_ = index;
}

void Transport::setup(CURL* h, size_t index, std::string_view path, const std::string& body,
                      const std::string& token, long timeout_ms, curl_slist** headers) const {
  const std::string url = options_.endpoints[index] + std::string(path);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());  // curl copies strings it is given
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  if (timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  *headers = curl_slist_append(nullptr, "Content-Type: application/json");
  *headers = curl_slist_append(*headers, "Expect:");  // no 100-continue round trip
  if (!token.empty()) *headers = curl_slist_append(*headers, ("Authorization: " + token).c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
  if (!options_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (!options_.cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, options_.cert_file.c_str());
  if (!options_.key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, options_.key_file.c_str());
}

Exchange Transport::perform(size_t index, std::string_view path, const std::string& body,
                            const std::string& token) const {
  CURL* h = thread_easy_handle();
  curl_slist* headers = nullptr;
  setup(h, index, path, body, token, static_cast<long>(options_.timeout.count()), &headers);
  Exchange x;
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_to_string);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x.body);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  x.curl = curl_easy_perform(h);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  if (x.curl != CURLE_OK) x.curl_error = error[0] ? error : curl_easy_strerror(x.curl);
  long request_bytes = 0;
  curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_bytes);
  x.sent = request_bytes > 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x.http_status);
  return x;
}

std::string Transport::token_for(size_t index) {
  if (options_.user.empty()) return {};
  {
    std::lock_guard lock(mu_);
    if (!token_.empty()) return token_;
    if (auth_off_) return {};
  }
  const Json body = {{"name", options_.user}, {"password", options_.password}};
  const Exchange x = perform(index, "/v3/auth/authenticate", body.dump(), "");
  const std::string& url = options_.endpoints[index];
  if (x.curl != CURLE_OK) throw EtcdUnavailable(url + ": " + x.curl_error);
  const Json reply = Json::parse(x.body, nullptr, false);
  int code = 0;
  std::string message;
  if (error_of(reply, code, message)) {
    if (code == kGrpcUnavailable) throw EtcdUnavailable(url + ": " + message);
    if (message.find("authentication is not enabled") != std::string::npos) {
      std::lock_guard lock(mu_);
      auth_off_ = true;  // until etcd asks for a token
      return {};
    }
    throw EtcdError("etcd authentication as '" + options_.user + "' failed: " + message, code);
  }
  if (!reply.is_object() || !reply.contains("token") || !reply["token"].is_string())
    throw EtcdError(url + "/v3/auth/authenticate: no token in the reply: " + excerpt(x.body), 0);
  std::lock_guard lock(mu_);
  token_ = reply["token"].get<std::string>();
  return token_;
}

void Transport::drop_token(const std::string& token) {
  std::lock_guard lock(mu_);
  if (token_ == token) {
    token_.clear();
    auth_off_ = false;
  }
}

bool Transport::wants_auth(int code, const std::string& message) {
  return code == kGrpcUnauthenticated || message.find("user name is empty") != std::string::npos;
}

Json Transport::request(std::string_view path, const Json& body, bool may_repeat) {
  const std::string text = body.dump();
  std::string failures;
  const size_t n = endpoint_count(), first = preferred();
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (first + i) % n;
    const std::string where = endpoint_url(index) + std::string(path);
    for (int attempt = 0;; ++attempt) {  // a second attempt only after re-authenticating
      std::string token;
      try {
        token = token_for(index);
      } catch (const EtcdUnavailable& e) {
        failures += std::string("; ") + e.what();
        break;
      }
      const Exchange x = perform(index, path, text, token);
      if (x.curl != CURLE_OK) {
        if (x.sent && !may_repeat)
          throw EtcdUnavailable(where + ": " + x.curl_error + " (the request may have been applied)");
        failures += "; " + where + ": " + x.curl_error;
        break;
      }
      const Json reply = Json::parse(x.body, nullptr, false);
      if (reply.is_discarded() || !reply.is_object()) {
        // Not etcd's JSON: a proxy, or a server that is not etcd 3.4's gateway.
        const std::string what = where + ": HTTP " + std::to_string(x.http_status) + ": " + excerpt(x.body);
        if (x.http_status < 500) throw EtcdError(what, 0);
        if (!may_repeat) throw EtcdUnavailable(what + " (the request may have been applied)");
        failures += "; " + what;
        break;
      }
      int code = 0;
      std::string message;
      if (error_of(reply, code, message)) {
        if (wants_auth(code, message) && !options_.user.empty() && attempt == 0) {
          drop_token(token);
          continue;
        }
        if (code == kGrpcUnavailable) {
          if (!may_repeat) throw EtcdUnavailable(where + ": " + message + " (the request may have been applied)");
          failures += "; " + where + ": " + message;
          break;
        }
        throw EtcdError(message, code);
      }
      set_preferred(index);
      return reply;
    }
  }
  throw EtcdUnavailable("etcd unavailable: " + failures.substr(failures.empty() ? 0 : 2));
}

}  // namespace cluster::etcd_detail
