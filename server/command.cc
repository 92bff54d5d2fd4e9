#include "server/command.h"

#include <cctype>

namespace server {

void to_lower(std::string_view in, std::string* out) {
  out->resize(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    (*out)[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(in[i])));
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

void CommandTable::add(CommandSpec spec) {
  if (by_name_.count(spec.name) != 0) return;
  spec.full_name = spec.name;
  spec.id = static_cast<uint32_t>(count_++);
  for (auto& sub : spec.subcommands) {
    sub.full_name = spec.name + "|" + sub.name;
    sub.id = static_cast<uint32_t>(count_++);
  }
  std::string name = spec.name;
  auto [it, inserted] = by_name_.emplace(name, std::move(spec));
  order_.push_back(&it->second);
}

const CommandSpec* CommandTable::find(std::string_view name) const {
  char lower[32] = {};  // longer than any command name
  if (name.size() > sizeof lower) return nullptr;
  for (size_t i = 0; i < name.size(); ++i)
    lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
  auto it = by_name_.find(std::string_view(lower, name.size()));
  return it == by_name_.end() ? nullptr : &it->second;
}

const CommandSpec* CommandTable::find_sub(const CommandSpec& container, std::string_view name) {
  for (const auto& sub : container.subcommands)
    if (iequals(sub.name, name)) return &sub;
  return nullptr;
}

void CommandTable::set_find_keys(std::string_view name, decltype(CommandSpec::find_keys) fn) {
  if (auto it = by_name_.find(name); it != by_name_.end()) it->second.find_keys = fn;
}

void CommandTable::set_reads_values(std::string_view name,
                                    decltype(CommandSpec::reads_values) fn) {
  if (auto it = by_name_.find(name); it != by_name_.end()) it->second.reads_values = fn;
}

void CommandTable::set_write_bytes(std::string_view name, decltype(CommandSpec::write_bytes) fn) {
  if (auto it = by_name_.find(name); it != by_name_.end()) it->second.write_bytes = fn;
}

const CommandSpec* CommandTable::resolve(std::span<const std::string_view> args) const {
  if (args.empty()) return nullptr;
  const CommandSpec* spec = find(args[0]);
  if (spec != nullptr && !spec->subcommands.empty() && args.size() >= 2)
    spec = find_sub(*spec, args[1]);
  return spec;
}

bool CommandTable::range_keys(const CommandSpec& spec, size_t argc, std::vector<size_t>& out) {
  if (spec.find_keys != nullptr) return false;
  if (spec.first_key <= 0) return true;
  // A negative last counts from the end (-1: the last argument); a call shorter than the range
  // (possible only with a negative arity) yields the keys it has.
  const int64_t n = static_cast<int64_t>(argc);
  const int64_t last = spec.last_key < 0 ? n + spec.last_key : spec.last_key;
  const int64_t step = spec.key_step > 0 ? spec.key_step : 1;
  for (int64_t i = spec.first_key; i <= last && i < n; i += step)
    out.push_back(static_cast<size_t>(i));
  return true;
}

}  // namespace server
