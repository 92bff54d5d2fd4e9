#include "server/arg_parser.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "server/errors.h"

namespace server {

std::optional<int64_t> parse_int(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  size_t i = 0;
  bool neg = false;
  if (s[0] == '-') {
    neg = true;
    i = 1;
    if (s.size() == 1) return std::nullopt;
  }
  if (s[i] == '0') {
    if (s.size() == 1) return 0;
    return std::nullopt;  // leading zero, or "-0"
  }
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    unsigned d = static_cast<unsigned char>(s[i]) - '0';
    if (d > 9) return std::nullopt;
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (neg) {
    if (v > uint64_t{INT64_MAX} + 1) return std::nullopt;
    return static_cast<int64_t>(0 - v);
  }
  if (v > uint64_t{INT64_MAX}) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<long double> parse_long_double(std::string_view s) {
  if (s.empty() || s.size() >= 5 * 1024 || std::isspace(static_cast<unsigned char>(s[0])))
    return std::nullopt;
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  long double v = std::strtold(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || std::isnan(v)) return std::nullopt;
  if (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || std::isnan(v)) return std::nullopt;
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0)) return std::nullopt;
  return v;
}

std::string format_long_double(long double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[5600];
  int n = std::snprintf(buf, sizeof buf, "%.17Lf", v);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return "0";
  std::string s(buf, n);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string_view ArgParser::next() {
  if (done()) {
    fail(err::kSyntax);
    return {};
  }
  return args_[pos_++];
}

bool ArgParser::eat(std::string_view token) {
  if (done() || !iequals(args_[pos_], token)) return false;
  ++pos_;
  return true;
}

int64_t ArgParser::next_int() {
  std::string_view s = next();
  if (!ok()) return 0;
  auto v = parse_int(s);
  if (!v) {
    fail(err::kNotInteger);
    return 0;
  }
  return *v;
}

std::optional<int64_t> deadline_ms(int64_t value, bool seconds, bool absolute, int64_t now_ms) {
  if (value <= 0) return std::nullopt;
  if (seconds) {
    if (value > INT64_MAX / 1000) return std::nullopt;
    value *= 1000;
  }
  if (!absolute) {
    if (value > INT64_MAX - now_ms) return std::nullopt;
    value += now_ms;
  }
  return value;
}

bool parse_expire_option(ArgParser& p, bool allow_keep, bool allow_persist, ExpireOption* opt) {
  struct Unit {
    const char* token;
    bool seconds, absolute;
  };
  static const Unit units[] = {
      {"EX", true, false}, {"PX", false, false}, {"EXAT", true, true}, {"PXAT", false, true}};
  for (const auto& u : units) {
    if (!p.eat(u.token)) continue;
    const bool other = opt->kind == ExpireOption::kKeep || opt->kind == ExpireOption::kPersist ||
                       (opt->kind == ExpireOption::kAt &&
                        (opt->seconds != u.seconds || opt->absolute != u.absolute));
    if (other || p.done()) {
      p.fail(err::kSyntax);
      return true;
    }
    opt->kind = ExpireOption::kAt;
    opt->value = p.next();
    opt->seconds = u.seconds;
    opt->absolute = u.absolute;
    return true;
  }
  const bool keep = allow_keep && p.eat("KEEPTTL");
  if (keep || (allow_persist && p.eat("PERSIST"))) {
    const ExpireOption::Kind kind = keep ? ExpireOption::kKeep : ExpireOption::kPersist;
    if (opt->kind != ExpireOption::kNone && opt->kind != kind) p.fail(err::kSyntax);
    opt->kind = kind;
    return true;
  }
  return false;
}

std::optional<std::string> resolve_expire(ExpireOption* opt, std::string_view command,
                                          int64_t now_ms) {
  if (opt->kind != ExpireOption::kAt) return std::nullopt;
  const auto v = parse_int(opt->value);
  if (!v) return std::string(err::kNotInteger);
  const auto at = deadline_ms(*v, opt->seconds, opt->absolute, now_ms);
  if (!at) return err::invalid_expire(command);
  opt->at_ms = *at;
  return std::nullopt;
}

}  // namespace server
