// server/main.cc - stratakv-server: command line, config, start, graceful stop.
//
//   stratakv-server [FILE] [--config FILE] [--<config-key> <value>]... [--help] [--version]
//
// Later sources win: defaults, the TOML file, then command-line keys in order.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "rdma/verbs_transport.h"
#include "server/commands/family.h"
#include "server/config.h"
#include "server/log.h"
#include "server/os_tuning.h"
#include "server/server.h"
#include "server/version.h"
#include "tiering/memory_tier.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: stratakv-server [FILE] [--config FILE] [--<key> <value>]...\n"
               "       stratakv-server --help | --version\n\n"
               "FILE is a TOML config (see conf/stratakv.toml); any config key can be given on\n"
               "the command line, e.g. --port 6380 --bind 0.0.0.0 --maxclients 100\n"
               "--requirepass secret --unixsocket /tmp/stratakv.sock --threads 4\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  server::Config config;
  std::vector<std::pair<std::string, std::string>> overrides;
  std::string file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if (a == "--version" || a == "-v") {
      std::printf("stratakv-server v=%s (redis_version=%s)\n", STRATAKV_VERSION,
                  STRATAKV_REDIS_VERSION);
      return 0;
    }
    if (a.rfind("--", 0) == 0) {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
        return 1;
      }
      std::string key = a.substr(2);
      if (key == "config") file = args[++i];
      else overrides.emplace_back(key, args[++i]);
    } else if (i == 0) {
      file = a;
    } else {
      std::fprintf(stderr, "error: unexpected argument '%s'\n", a.c_str());
      usage(stderr);
      return 1;
    }
  }
  if (!file.empty()) {
    if (auto err = config.load_file(file)) {
      std::fprintf(stderr, "error: %s\n", err->c_str());
      return 1;
    }
  }
  for (const auto& [key, value] : overrides) {
    if (auto err = config.set(key, value, false)) {
      std::fprintf(stderr, "error: --%s %s: %s\n", key.c_str(), value.c_str(), err->c_str());
      return 1;
    }
  }
  server::log::configure(static_cast<server::log::Level>(config.num(server::Key::kLogLevel)),
                         config.str(server::Key::kLogFile));
  std::signal(SIGPIPE, SIG_IGN);

  // maxclients needs maxclients + 32 file descriptors: the limit is raised, or maxclients
  // lowered to fit it, as Redis's adjustOpenFilesLimit does.
  const server::OpenFilesLimit files =
      server::adjust_open_files_limit(config.num(server::Key::kMaxClients));
  for (const auto& [level, line] : files.log) server::log::write(level, line);
  if (files.fatal) return 1;
  if (files.maxclients != config.num(server::Key::kMaxClients))
    (void)config.set("maxclients", std::to_string(files.maxclients), false);

  // The RDMA device, if any: one log line either way. Looked for first, because a region
  // registered with a NIC must keep its pages (no purge).
  std::unique_ptr<rdma::VerbsDevice> verbs;
  if (config.num(server::Key::kRdmaEnabled)) {
    rdma::DeviceOptions o;
    o.name = config.str(server::Key::kRdmaDevice);
    o.gid_index = static_cast<int>(config.num(server::Key::kRdmaGidIndex));
    std::string line;
    verbs = rdma::VerbsDevice::probe(rdma::real_verbs(), o, line);
    server::log::notice(line);
  } else {
    server::log::notice("RDMA: rdma.enabled is off, fast path over verbs disabled");
  }

  // The memory region every value lives in, before anything allocates a value. Its default
  // (0, resolved by Config) is a share of the machine's memory: reserved, not touched, so it
  // costs nothing until used.
  const int64_t capacity = config.num(server::Key::kMemoryCapacity);
  tiering::RegionOptions region;
  region.capacity = static_cast<size_t>(capacity);
  region.purge = verbs == nullptr;
  region.hugepages = config.num(server::Key::kMemoryHugepages) != 0;
  const int64_t maxmemory = config.num(server::Key::kMaxMemory);
  region.prefault = static_cast<size_t>(std::min(config.num(server::Key::kMemoryPrefault),
                                                 maxmemory > 0 ? maxmemory : capacity));
  std::string region_error;
  if (!tiering::MemoryTier::start(region, &region_error)) {
    server::log::warning("cannot create the memory region capacity=" +
                         std::to_string(region.capacity) + ": " + region_error);
    return 1;
  }
  const tiering::MemoryRegion& r = tiering::MemoryTier::region();
  static const char* const kBacking[] = {"normal pages", "transparent huge pages", "hugetlb"};
  server::log::notice("memory region capacity=" + std::to_string(r.size()) + " (" +
                      server::Config::human_bytes(r.size()) + "; machine memory " +
                      server::Config::human_bytes(server::machine_memory_bytes()) +
                      ") backing=\"" +
                      kBacking[static_cast<int>(r.hugepages())] + "\"");
  if (r.prefaulted() > 0)
    server::log::notice("memory.prefault: touched " + server::Config::human_bytes(r.prefaulted()) +
                        " of the region in " + std::to_string(r.prefault_ms()) + " ms");
  if (region.hugepages && r.hugepages() != tiering::HugePages::kHugetlb)
    server::log::warning("memory.hugepages: hugetlb pages unavailable: " + r.note());

  if (verbs) {
    std::string err;
    if (!verbs->register_region(r.base(), r.size(), err)) {
      server::log::warning("RDMA: cannot register the memory region, verbs disabled: " + err);
      verbs.reset();
    }
  }

  server::Server srv(config);
  srv.set_verbs(std::move(verbs));
  // The aclfile's users, before the first client (acl.c ACLLoadUsersAtStartup): a file that
  // does not load stops the start, as in Redis.
  if (const std::string aclfile = config.str(server::Key::kAclFile); !aclfile.empty()) {
    if (std::string err = server::load_aclfile(srv, aclfile); !err.empty()) {
      server::log::warning(err);
      server::log::warning("Aborting stratakv startup because of ACL errors");
      return 1;
    }
  }
  // The SSD tier opens and recovers its keys before the first client connects.
  srv.start_ssd_tier();
  if (auto err = srv.listen()) {
    server::log::warning(*err);
    return 1;
  }
  server::log::notice("stratakv " + std::string(STRATAKV_VERSION) + " ready to accept connections" +
                      " port=" + std::to_string(srv.tcp_port()) +
                      (srv.tls_port() != 0 ? " tls-port=" + std::to_string(srv.tls_port())
                                           : std::string()) +
                      (config.str(server::Key::kUnixSocket).empty()
                           ? std::string()
                           : " unixsocket=" + config.str(server::Key::kUnixSocket)) +
                      " threads=" + std::to_string(config.num(server::Key::kThreads)) +
                      (file.empty() ? std::string() : " config=" + file));
  srv.run();
  return 0;
}
