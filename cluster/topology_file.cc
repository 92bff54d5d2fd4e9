// cluster/topology_file.cc - load_topology_file / save_topology_file (cluster/topology_file.h).
#include "cluster/topology_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cluster {
namespace {

[[noreturn]] void fail_errno(const std::string& what, const std::string& path) {
  throw TopologyError(what + " " + path + ": " + std::strerror(errno));
}

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Topology load_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_errno("cannot open topology file", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail_errno("cannot read topology file", path);
  try {
    return decode(text.str());
  } catch (const TopologyError& e) {
    throw TopologyError(path + ": " + e.what());
  }
}

void save_topology_file(const std::string& path, const Topology& topology) {
  const std::string text = encode(topology) + "\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (f.fd < 0) fail_errno("cannot create", tmp);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        errno = err;
        fail_errno("cannot write", tmp);
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(f.fd) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      errno = err;
      fail_errno("cannot fsync", tmp);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    fail_errno("cannot rename " + tmp + " to", path);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd < 0 || ::fsync(d.fd) != 0) fail_errno("cannot fsync directory", dir);
}

}  // namespace cluster
