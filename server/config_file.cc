// server/config_file.cc - a TOML config file (Config::load_file, Config::load_text): the
// text is refused before toml11 parses it for what toml11 3.7.1 mishandles (invalid UTF-8,
// nesting or dotted keys past 32, binary integers past 62 digits: each found by
// tests/fuzz/config_fuzz.cc), then flattened into dotted names and set as CONFIG SET would.
#include "server/config.h"

#include <fstream>
#include <sstream>

#include <toml.hpp>

#include "server/ascii.h"

namespace server {

namespace {

// Flattens a TOML table into (dotted name, value text) pairs.
std::optional<std::string> flatten(const toml::value& table, const std::string& prefix,
                                   std::vector<std::pair<std::string, std::string>>* out) {
  for (const auto& [k, v] : table.as_table()) {
    std::string name = prefix.empty() ? k : prefix + "." + k;
    if (v.is_table()) {
      if (auto err = flatten(v, name, out)) return err;
    } else if (v.is_string()) {
      out->emplace_back(name, v.as_string().str);
    } else if (v.is_integer()) {
      out->emplace_back(name, std::to_string(v.as_integer()));
    } else if (v.is_boolean()) {
      out->emplace_back(name, v.as_boolean() ? "yes" : "no");
    } else if (v.is_floating()) {
      out->emplace_back(name, std::to_string(v.as_floating()));
    } else {
      return "unsupported value type for '" + name + "'";
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> Config::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot open the file";
  std::ostringstream text;
  text << in.rdbuf();
  return load_text(std::move(text).str(), path);
}

namespace {

// The offset of the first byte of `text` that is not valid UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing past U+10FFFF), or npos. A TOML document must be valid UTF-8 (TOML
// 1.0), and toml11 3.7.1 reads past its buffer on some invalid sequences inside a string
// (found by tests/fuzz/config_fuzz.cc), so the text is checked before it is parsed.
size_t invalid_utf8_at(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (len > n - i) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char b = p[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// Arrays, inline tables and dotted keys nested deeper than this are refused before parsing:
// toml11 3.7.1 parses arrays and tables by recursion, and a file of a few thousand '[' overflows
// the stack; a key of hundreds of dotted parts (each a nested table) took a second to parse
// (both found by tests/fuzz/config_fuzz.cc). No key of ours takes an array or a table value, and
// none has more than a few parts.
constexpr size_t kMaxNesting = 32;

// Binary integers of more digits than this are refused before parsing: toml11 3.7.1 doubles a
// signed 64-bit place value once per digit, leading zeros included, which overflows (undefined
// behaviour) at the 63rd digit (found by tests/fuzz/config_fuzz.cc). No key of ours needs a
// binary literal near 2^62.
constexpr size_t kMaxBinaryDigits = 62;

/// What a config file may not hold although TOML allows it: where (a byte offset) and why.
struct TomlRefusal {
  size_t at;
  std::string why;
};

// The first thing in `text` (outside strings and comments) that toml11 must not see: a '[' or
// '{' that opens a level past kMaxNesting, the first '.' of a key past kMaxNesting parts, or a
// binary integer of more than kMaxBinaryDigits digits. A key runs from the start of a line
// outside an array (a table header's too), or from an inline table's '{' or ',', to its '='.
std::optional<TomlRefusal> toml_refusal(std::string_view text) {
  const auto word_char = [](char ch) {  // a letter, digit or '_': inside a bare word or number
    const unsigned char f = fold(static_cast<unsigned char>(ch));
    return (f >= 'a' && f <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
  };
  const auto too_deep = [](size_t at) {
    return TomlRefusal{at, "arrays, tables or keys nested more than " +
                               std::to_string(kMaxNesting) + " deep"};
  };
  char open[kMaxNesting + 1];  // the brackets open now, innermost last
  size_t depth = 0, dots = 0;
  bool in_key = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '#') {  // a comment, to the end of the line
      const size_t eol = text.find('\n', i);
      if (eol == std::string_view::npos) return std::nullopt;
      i = eol - 1;
    } else if (c == '\n') {
      in_key = depth == 0 || open[depth - 1] == '{';
      dots = 0;
    } else if (c == '"' || c == '\'') {
      // A string: basic ("..." with escapes) or literal ('...'), one line or three quotes.
      const bool triple = text.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "\'\'\'");
      const std::string_view close = triple ? text.substr(i, 3) : text.substr(i, 1);
      size_t j = i + close.size();
      for (;; ++j) {
        if (j >= text.size()) return std::nullopt;  // unterminated: toml11 says so
        if (c == '"' && text[j] == '\\') {
          ++j;
          continue;
        }
        if (text.substr(j, close.size()) == close) break;
      }
      i = j + close.size() - 1;
    } else if (c == '[' || c == '{') {
      if (depth == kMaxNesting) return too_deep(i);
      open[depth++] = c;
      if (c == '{') in_key = true, dots = 0;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth > 0 && open[depth - 1] == '{') {
      in_key = true, dots = 0;
    } else if (c == '=') {
      in_key = false;
    } else if (c == '.' && in_key && ++dots >= kMaxNesting) {
      return too_deep(i);
    } else if (c == '0' && !in_key && i + 1 < text.size() && text[i + 1] == 'b' &&
               (i == 0 || !word_char(text[i - 1]))) {
      size_t digits = 0, j = i + 2;
      for (; j < text.size() && (text[j] == '0' || text[j] == '1' || text[j] == '_'); ++j)
        digits += text[j] != '_';
      if (digits > kMaxBinaryDigits)
        return TomlRefusal{i, "a binary integer of more than " +
                                  std::to_string(kMaxBinaryDigits) + " digits"};
      i = j - 1;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> Config::load_text(std::string text, const std::string& name) {
  if (const size_t at = invalid_utf8_at(text); at != std::string_view::npos)
    return name + ": not valid UTF-8 at byte " + std::to_string(at) +
           " (a TOML file must be UTF-8)";
  if (const auto refusal = toml_refusal(text))
    return name + ": " + refusal->why + " at byte " + std::to_string(refusal->at);
  std::vector<std::pair<std::string, std::string>> pairs;
  try {
    std::istringstream in(std::move(text));
    const toml::value root = toml::parse(in, name);
    if (auto err = flatten(root, "", &pairs)) return name + ": " + *err;
  } catch (const std::exception& e) {
    return e.what();
  }
  for (const auto& [key, value] : pairs)
    if (auto err = set(key, value, false)) return name + ": " + key + ": " + *err;
  return std::nullopt;
}

}  // namespace server

