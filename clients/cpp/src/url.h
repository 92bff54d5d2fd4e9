// url.h - the server address a Client is made from.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stratakv/client.h"

namespace stratakv::detail {

/// TLS settings of a `rediss://` URL (redis-py's query parameter names in the comments).
struct TlsConfig {
  std::string ca_certs;         ///< ssl_ca_certs: PEM file of trusted CAs (empty: the system's)
  std::string certfile;         ///< ssl_certfile: PEM client certificate (empty: none)
  std::string keyfile;          ///< ssl_keyfile: its PEM private key (empty: in certfile)
  bool verify_peer = true;      ///< ssl_cert_reqs=required (true) | none (false)
  bool check_hostname = false;  ///< ssl_check_hostname=true|false: the certificate names the host
};

struct Url {
  enum class Scheme { kTcp, kUnix };
  Scheme scheme = Scheme::kTcp;
  std::string host;  ///< kTcp
  int port = 6379;   ///< kTcp
  std::string path;  ///< kUnix: the socket's path
  std::string user;
  std::string password;
  /// `?read_from=primary|replicas|nearest` (a cluster URL's; accepted on any URL).
  std::optional<ReadFrom> read_from;
  /// `rediss://`: the connection is TLS (kTcp only), with these settings.
  bool tls = false;
  TlsConfig tls_config;
  /// Not from the text: the connection sends READONLY after AUTH (a cluster replica read
  /// through, see cluster_core.h).
  bool readonly = false;
};

/// Parses `redis://[[user]:password@]host[:port][/0]`, `[user:password@]` with IPv6 hosts in
/// brackets, and `unix://[[user]:password@]/path[?password=..&user=..]`. Percent-escapes in the
/// user, password and path are decoded. The query may also hold `read_from=primary|replicas|
/// nearest`. `rediss://` is redis:// over TLS; its query may also hold redis-py's `ssl_ca_certs=PATH`,
/// `ssl_certfile=PATH`, `ssl_keyfile=PATH`, `ssl_cert_reqs=required|none` and
/// `ssl_check_hostname=true|false` (TlsConfig; refused on other schemes). Throws Error(kUsage)
/// naming what is wrong (an unknown query parameter too).
Url parse_url(std::string_view text);

/// Whether `text` is a cluster URL (starts with "redis+cluster://" or "rediss+cluster://").
bool is_cluster_url(std::string_view text);
/// Parses `redis+cluster://[[user]:password@]host:port[,host:port...][?password=..&user=..]`:
/// the seed nodes, each a kTcp Url with the user and password (and the query's read_from).
/// `rediss+cluster://` gives the same seeds over TLS, with the query's `ssl_*` as rediss://.
/// Throws Error(kUsage).
std::vector<Url> parse_cluster_url(std::string_view text);

}  // namespace stratakv::detail
