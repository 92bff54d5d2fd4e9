#include "url.h"

#include <cctype>
#include <charconv>

#include "stratakv/error.h"

namespace stratakv::detail {
namespace {

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw Error(Error::Kind::kUsage, "bad URL '" + std::string(text) + "': " + why);
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode(std::string_view text, std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) bad(text, "bad %-escape");
    out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
    i += 2;
  }
  return out;
}

// "user:password" or ":password" or "password"-less "user".
void read_userinfo(std::string_view text, std::string_view info, Url& url) {
  const size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    url.user = decode(text, info);
    return;
  }
  url.user = decode(text, info.substr(0, colon));
  url.password = decode(text, info.substr(colon + 1));
}

bool read_bool(std::string_view text, std::string_view name, const std::string& value) {
  if (value == "true" || value == "True" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "False" || value == "0" || value == "no") return false;
  bad(text, std::string(name) + " must be true or false, not '" + value + "'");
}

// redis-py's from_url names (ssl_*); only on rediss://.
void read_tls_parameter(std::string_view text, std::string_view name, const std::string& value,
                        Url& url) {
  if (!url.tls) bad(text, std::string(name) + " needs a rediss:// URL");
  TlsConfig& t = url.tls_config;
  if (name == "ssl_ca_certs") t.ca_certs = value;
  else if (name == "ssl_certfile") t.certfile = value;
  else if (name == "ssl_keyfile") t.keyfile = value;
  else if (name == "ssl_check_hostname") t.check_hostname = read_bool(text, name, value);
  else if (name == "ssl_cert_reqs") {
    if (value == "required" || value == "CERT_REQUIRED") t.verify_peer = true;
    else if (value == "none" || value == "CERT_NONE") t.verify_peer = false;
    else bad(text, "ssl_cert_reqs must be required or none, not '" + value + "'");
  } else {
    bad(text, "unsupported query parameter '" + std::string(name) + "'");
  }
}

void read_query(std::string_view text, std::string_view query, Url& url) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    std::string_view name = pair.substr(0, eq);
    std::string value = eq == std::string_view::npos ? "" : decode(text, pair.substr(eq + 1));
    if (name == "password") url.password = value;
    else if (name == "user" || name == "username") url.user = value;
    else if (name == "db" && (value == "0" || value.empty())) continue;
    else if (name == "read_from") {
      if (value == "primary") url.read_from = ReadFrom::kPrimary;
      else if (value == "replicas") url.read_from = ReadFrom::kReplicas;
      else if (value == "nearest") url.read_from = ReadFrom::kNearest;
      else bad(text, "read_from must be primary, replicas or nearest, not '" + value + "'");
    }
    else if (name.starts_with("ssl_")) read_tls_parameter(text, name, value, url);
    else bad(text, "unsupported query parameter '" + std::string(name) + "'");
  }
}

}  // namespace

Url parse_url(std::string_view text) {
  Url url;
  std::string_view rest;
  if (text.starts_with("redis://")) {
    rest = text.substr(8);
  } else if (text.starts_with("unix://")) {
    url.scheme = Url::Scheme::kUnix;
    rest = text.substr(7);
  } else if (text.starts_with("rediss://")) {
    url.tls = true;
    rest = text.substr(9);
  } else {
    bad(text, "the scheme must be redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://");
  }
  const size_t q = rest.find('?');
  if (q != std::string_view::npos) {
    read_query(text, rest.substr(q + 1), url);
    rest = rest.substr(0, q);
  }
  if (url.tls && url.tls_config.check_hostname && !url.tls_config.verify_peer)
    bad(text, "ssl_check_hostname=true needs ssl_cert_reqs=required");
  if (url.tls && !url.tls_config.keyfile.empty() && url.tls_config.certfile.empty())
    bad(text, "ssl_keyfile needs ssl_certfile");
  // userinfo ends at the last '@' before the path (a password may hold '@' only escaped).
  const size_t at = url.scheme == Url::Scheme::kUnix ? rest.find("@/") : rest.find('@');
  if (at != std::string_view::npos) {
    read_userinfo(text, rest.substr(0, at), url);
    rest = rest.substr(at + 1);
  }
  if (url.scheme == Url::Scheme::kUnix) {
    if (rest.empty() || rest[0] != '/') bad(text, "a unix:// URL needs an absolute socket path");
    url.path = decode(text, rest);
    return url;
  }
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && db != "0") bad(text, "only database 0 exists");
    rest = rest.substr(0, slash);
  }
  std::string_view port;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) bad(text, "unclosed '[' in the host");
    url.host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') bad(text, "expected ':' after the host");
      port = rest.substr(1);
    }
  } else {
    const size_t colon = rest.find(':');
    url.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (url.host.empty()) bad(text, "no host");
  for (char c : url.host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' && c != ':')
      bad(text, "bad character in the host");
  if (!port.empty() || rest.ends_with(":")) {
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc{} || end != port.data() + port.size() || p <= 0 || p > 65535)
      bad(text, "bad port");
    url.port = p;
  }
  return url;
}

bool is_cluster_url(std::string_view text) {
  return text.starts_with("redis+cluster://") || text.starts_with("rediss+cluster://");
}

std::vector<Url> parse_cluster_url(std::string_view text) {
  if (!is_cluster_url(text)) bad(text, "the scheme must be redis+cluster:// or rediss+cluster://");
  const bool tls = text.starts_with("rediss+");
  const std::string_view seed_scheme = tls ? "rediss://" : "redis://";
  std::string_view rest = text.substr(tls ? 17 : 16);
  std::string_view query;
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q);
    rest = rest.substr(0, q);
  }
  std::string_view userinfo;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = rest.substr(0, at + 1);
    rest = rest.substr(at + 1);
  }
  std::vector<Url> seeds;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view host = rest.substr(0, comma);
    if (host.empty()) bad(text, "an empty seed address");
    try {
      seeds.push_back(parse_url(std::string(seed_scheme) + std::string(userinfo) + std::string(host) + std::string(query)));
    } catch (const Error& e) {
      bad(text, "seed '" + std::string(host) + "': " + e.what());
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return seeds;
}

}  // namespace stratakv::detail
