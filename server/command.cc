#include "server/command.h"

#include <cassert>

namespace server {

namespace {

// FNV-1a (64-bit) of `name` folded to lower case: equal for names that differ only in case.
inline uint64_t folded_hash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ fold(c)) * 0x100000001b3ull;
  return h;
}

// Whether `name` folded to lower case equals `lower` (already lower case).
inline bool equals_folded(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (fold(static_cast<unsigned char>(name[i])) != static_cast<unsigned char>(lower[i]))
      return false;
  return true;
}

}  // namespace

void CommandTable::add(CommandSpec spec) {
  assert(equals_folded(spec.name, spec.name) && "command names are registered in lower case");
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
  rebuild_index();
}

const CommandSpec* CommandTable::find(std::string_view name) const {
  if (index_.empty()) return nullptr;
  const uint64_t h = folded_hash(name);
  const size_t mask = index_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const IndexSlot& slot = index_[i];
    if (slot.spec == nullptr) return nullptr;
    if (slot.hash == h && equals_folded(name, slot.spec->name)) return slot.spec;
  }
}

void CommandTable::rebuild_index() {
  size_t slots = 16;
  while (slots < 4 * by_name_.size()) slots *= 2;
  index_.assign(slots, IndexSlot{});
  const size_t mask = slots - 1;
  for (const auto& [name, spec] : by_name_) {
    const uint64_t h = folded_hash(name);
    size_t i = h & mask;
    while (index_[i].spec != nullptr) i = (i + 1) & mask;
    index_[i] = IndexSlot{h, &spec};
  }
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

void CommandTable::set_events(std::string_view name, KeyEvents events) {
  if (auto it = by_name_.find(name); it != by_name_.end()) it->second.events = events;
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
