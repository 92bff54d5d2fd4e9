// tests/fuzz/config_fuzz.cc - libFuzzer target of the config parser (server/config.h): the TOML
// file (Config::load_text) and CONFIG SET / CONFIG GET (Config::set, Config::get).
//
// Input: one control byte, then text. Control bit 0 clear: the text is a config file. Set: the
// text is NUL-separated name, value pairs applied with Config::set (bit 1: as CONFIG SET at run
// time, which refuses immutable keys; the first 16 pairs), and its last field a CONFIG GET glob
// pattern. Checked:
// nothing escapes as an exception; an accepted key's value reads back with CONFIG GET, and
// setting what CONFIG GET shows is accepted and shows the same again (what a client reads back
// from CONFIG GET it can always set: CONFIG REWRITE's promise); a failed set changes nothing
// CONFIG GET shows.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// CONFIG GET's value of the one key called `name` exactly (case-insensitively); nullopt when
// CONFIG GET does not list it. (Not a sentinel string: any text is a value some key accepts,
// and the fuzzer found "(absent)" set as `save`.)
std::optional<std::string> shown(const server::Config& c, std::string_view name) {
  std::optional<std::string> out;
  // The name as a pattern with glob characters escaped, so that only it matches.
  std::string pattern;
  for (char ch : name) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') pattern += '\\';
    pattern += ch;
  }
  for (auto& [k, v] : c.get(pattern))
    if (k.size() == name.size()) out = v;
  return out;
}

std::vector<std::string_view> split_nul(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const uint8_t control = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  server::Config config;
  if ((control & 1) == 0) {
    (void)config.load_text(std::string(text), "fuzz.toml");
    (void)config.get("*");
    return 0;
  }
  const bool runtime = (control & 2) != 0;
  const std::vector<std::string_view> fields = split_nul(text);
  // (At most 16 pairs: each builds a CONFIG GET of its key, and a whole Config per input.)
  for (size_t i = 0; i + 1 < fields.size() && i < 32; i += 2) {
    const std::string_view name = fields[i], value = fields[i + 1];
    const std::optional<std::string> before = shown(config, name);
    if (config.set(name, value, runtime)) {
      CHECK(shown(config, name) == before);  // a refused value changes nothing
      continue;
    }
    const std::optional<std::string> first = shown(config, name);
    CHECK(first.has_value());
    CHECK(!config.set(name, *first, runtime));
    CHECK(shown(config, name) == first);
  }
  if (fields.size() % 2 == 1) (void)config.get(fields.back());
  return 0;
}
