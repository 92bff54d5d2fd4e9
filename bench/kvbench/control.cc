// bench/kvbench/control.cc - INFO and CONFIG GET over a control connection.
#include "control.h"

#include <sstream>

#include "net.h"
#include "resp.h"

namespace kvbench {
namespace {

bool keep(const std::string& k) {
  static const char* const kExact[] = {"redis_version", "stratakv_version", "used_memory", "used_memory_rss",
                                       "maxmemory", "maxmemory_policy", "evicted_keys", "keyspace_hits",
                                       "keyspace_misses", "db0", "total_net_input_bytes",
                                       "total_net_output_bytes", "io_threads_active"};
  for (const char* e : kExact)
    if (k == e) return true;
  static const char* const kParts[] = {"ssd", "tier", "demot", "promot", "lease", "fastpath", "kv_"};
  for (const char* p : kParts)
    if (k.find(p) != std::string::npos) return true;
  return false;
}

std::string call(Conn& c, std::initializer_list<std::string_view> args) {
  std::string cmd;
  append_command(cmd, args);
  c.send_all(cmd);
  return read_reply_text(c);
}

}  // namespace

std::string ServerInfo::get(const std::string& key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return v;
  return "";
}

ServerInfo query_server_info(const Options& o) {
  ServerInfo info;
  try {
    Conn c = o.unix_path.empty() ? Conn::tcp(o.host, o.port) : Conn::unix_socket(o.unix_path);
    if (!o.password.empty()) call(c, {"AUTH", o.password});
    std::string text = call(c, {"INFO", "all"});
    if (text.rfind("-", 0) == 0) text = call(c, {"INFO"});
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
      std::string k = line.substr(0, colon);
      if (keep(k)) info.fields.emplace_back(k, line.substr(colon + 1));
    }
    // CONFIG GET replies [name, value] when the setting exists, [] otherwise.
    const std::string ssd = call(c, {"CONFIG", "GET", "tiering.ssd.enabled"});
    const size_t nl = ssd.find('\n');
    info.fields.emplace_back("config:tiering.ssd.enabled", nl == std::string::npos ? "" : ssd.substr(nl + 1));
  } catch (const std::exception& e) {
    info.error = e.what();
  }
  return info;
}

}  // namespace kvbench
