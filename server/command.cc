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
  spec.full_name = spec.name;
  for (auto& sub : spec.subcommands) sub.full_name = spec.name + "|" + sub.name;
  std::string name = spec.name;
  auto [it, inserted] = by_name_.emplace(name, std::move(spec));
  if (inserted) order_.push_back(&it->second);
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

std::vector<size_t> CommandTable::key_positions(const CommandSpec& spec, size_t argc) {
  std::vector<size_t> keys;
  if (spec.first_key <= 0 || argc == 0) return keys;
  size_t last = spec.last_key < 0 ? argc + spec.last_key : static_cast<size_t>(spec.last_key);
  size_t step = spec.key_step > 0 ? spec.key_step : 1;
  for (size_t i = spec.first_key; i <= last && i < argc; i += step) keys.push_back(i);
  return keys;
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

void CommandTable::keys_of(const CommandSpec& spec, std::span<const std::string_view> args,
                           std::vector<std::string_view>& out) {
  const size_t argc = args.size();
  if (spec.find_keys != nullptr) {
    std::vector<size_t> at;
    spec.find_keys(args, at);
    for (size_t i : at)
      if (i < argc) out.push_back(args[i]);
    return;
  }
  if (spec.first_key <= 0 || argc == 0) return;
  const size_t last =
      spec.last_key < 0 ? argc + spec.last_key : static_cast<size_t>(spec.last_key);
  const size_t step = spec.key_step > 0 ? spec.key_step : 1;
  for (size_t i = spec.first_key; i <= last && i < argc; i += step) out.push_back(args[i]);
}

}  // namespace server
