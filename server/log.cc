#include "server/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace server::log {
namespace {
std::mutex mu;
Level min_level = Level::kNotice;
FILE* out = nullptr;
}  // namespace

void configure(Level level, std::string_view path) {
  std::lock_guard lock(mu);
  min_level = level;
  if (!path.empty()) {
    FILE* f = std::fopen(std::string(path).c_str(), "a");
    if (f != nullptr) out = f;
  }
}

void write(Level level, std::string_view message) {
  if (level < min_level) return;
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm t;
  localtime_r(&tv.tv_sec, &t);
  char stamp[64];
  size_t n = std::strftime(stamp, sizeof stamp, "%d %b %Y %H:%M:%S", &t);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03d", static_cast<int>(tv.tv_usec / 1000));
  static const char marks[] = {'.', '-', '*', '#'};
  std::lock_guard lock(mu);
  FILE* f = out ? out : stderr;
  std::fprintf(f, "%d:M %s %c %.*s\n", static_cast<int>(getpid()), stamp,
               marks[static_cast<int>(level)], static_cast<int>(message.size()), message.data());
  std::fflush(f);
}

}  // namespace server::log
