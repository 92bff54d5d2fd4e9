// tiering/glob.h - Redis's glob-style pattern matching (stringmatchlen in util.c).
#pragma once

#include <string_view>

namespace tiering {

/// Matches `s` against a glob `pattern` the way Redis does for KEYS, SCAN MATCH and CONFIG GET:
/// `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, and `\x` to match x literally. Binary-safe.
/// `nocase` folds ASCII case.
bool glob_match(std::string_view pattern, std::string_view s, bool nocase = false);

}  // namespace tiering
