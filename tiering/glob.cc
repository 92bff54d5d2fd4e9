#include "tiering/glob.h"

#include <cctype>

namespace tiering {

// `give_up`: the rest of the pattern after some '*' matched no suffix of the string at all, so no
// earlier '*' can help by matching more (Redis's skipLongerMatches, the fix of CVE-2022-36021:
// without it "*a*a*a*a*a*a*a*a*b" against a long run of a's takes exponential time).
static bool match(const char* p, const char* pend, const char* s, const char* send, bool nocase,
                  int depth, bool* give_up) {
  auto fold = [nocase](unsigned char c) { return nocase ? std::tolower(c) : c; };
  if (depth > 1000) return false;  // Redis bounds recursion the same way (skip long patterns)
  while (p < pend && s <= send) {
    switch (*p) {
      case '*':
        while (p + 1 < pend && p[1] == '*') ++p;
        if (p + 1 == pend) return true;
        for (; s <= send; ++s) {
          if (match(p + 1, pend, s, send, nocase, depth + 1, give_up)) return true;
          if (*give_up) return false;
        }
        *give_up = true;
        return false;
      case '?':
        if (s == send) return false;
        ++s;
        break;
      case '[': {
        if (s == send) return false;
        ++p;
        bool negate = p < pend && *p == '^';
        if (negate) ++p;
        bool hit = false;
        while (p < pend && *p != ']') {
          if (*p == '\\' && p + 1 < pend) {
            ++p;
            if (fold(*p) == fold(*s)) hit = true;
          } else if (p + 2 < pend && p[1] == '-') {
            unsigned char lo = fold(p[0]), hi = fold(p[2]);
            if (lo > hi) std::swap(lo, hi);
            unsigned char c = fold(*s);
            if (c >= lo && c <= hi) hit = true;
            p += 2;
          } else if (fold(*p) == fold(*s)) {
            hit = true;
          }
          ++p;
        }
        if (p == pend) --p;  // unterminated class: Redis treats the end as its close
        if (negate) hit = !hit;
        if (!hit) return false;
        ++s;
        break;
      }
      case '\\':
        if (p + 1 < pend) ++p;
        [[fallthrough]];
      default:
        if (s == send || fold(*p) != fold(*s)) return false;
        ++s;
        break;
    }
    ++p;
  }
  while (p < pend && *p == '*') ++p;
  return p == pend && s == send;
}

bool glob_match(std::string_view pattern, std::string_view s, bool nocase) {
  bool give_up = false;
  return match(pattern.data(), pattern.data() + pattern.size(), s.data(), s.data() + s.size(),
               nocase, 0, &give_up);
}

}  // namespace tiering
