// Unit tests of tiering::ExecLock (a transaction's shards, re-entrant for its thread): KeyLocks
// and whole-keyspace calls inside it take no lock again, the shard lock count makes
// allocations throw NeedRoom, released values are freed after its locks, and transactions over
// keys of many shards are atomic for other threads.
#include <doctest.h>

#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tiering/exec_lock.h"
#include "tiering/key_lock.h"
#include "tiering/keyspace.h"

using tiering::ExecLock;
using tiering::KeyLock;
using tiering::Keyspace;
using tiering::ShardMutex;
using tiering::ValueRef;

namespace {

constexpr int64_t kNow = 1'700'000'000'000;

long read_num(KeyLock& lock, std::string_view key) {
  const KeyLock::Item* item = lock.find(key);
  return item ? std::stol(std::string(item->second.value->view())) : 0;
}

}  // namespace

TEST_CASE("exec lock: KeyLocks inside re-enter its shards; values go after its locks") {
  Keyspace ks(16);
  std::vector<std::string_view> keys{"a", "b", "c", "a"};
  ValueRef first = ValueRef::copy_of("1");
  {
    KeyLock lock(ks, "a", kNow);
    lock.set("a", first, 0);
  }
  {
    ExecLock exec(ks, keys, false);
    CHECK(ShardMutex::held_by_this_thread() == static_cast<int>(exec.shards()));
    {
      KeyLock lock(ks, std::span<const std::string_view>(keys), kNow);  // no self-deadlock
      CHECK(ShardMutex::held_by_this_thread() > static_cast<int>(exec.shards()));
      lock.set("a", ValueRef::copy_of("2"), 0);
      lock.set("b", ValueRef::copy_of("3"), 0);
    }
    // The replaced value is kept until the transaction's locks go.
    CHECK(first.use_count() == 2);
    KeyLock one(ks, "b", kNow);
    CHECK(read_num(one, "b") == 3);
  }
  CHECK(first.use_count() == 1);
  CHECK(ShardMutex::held_by_this_thread() == 0);
  CHECK(ShardMutex::reentrant() == nullptr);
}

TEST_CASE("exec lock: every shard, with whole-keyspace calls inside (DBSIZE, FLUSHALL)") {
  Keyspace ks(8);
  for (int i = 0; i < 20; ++i) {
    std::string k = "k" + std::to_string(i);
    KeyLock lock(ks, k, kNow);
    lock.set(k, ValueRef::copy_of("x"), 0);
  }
  {
    ExecLock exec(ks, {}, true);
    CHECK(exec.shards() == ks.shard_count());
    CHECK(ks.size() == 20);
    ks.flush(false);
    CHECK(ks.size() == 0);
  }
  // Unlocked: another thread can take any shard.
  std::thread([&] { CHECK(ks.size() == 0); }).join();
}

TEST_CASE("exec lock: transactions over many shards are atomic for other threads") {
  Keyspace ks(32);
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) names.push_back("atom:" + std::to_string(i));
  std::vector<std::string_view> keys(names.begin(), names.end());
  constexpr int kRounds = 2000;
  auto writer = [&] {
    for (int r = 0; r < kRounds; ++r) {
      ExecLock exec(ks, keys, false);
      for (std::string_view k : keys) {  // one KeyLock per command, as EXEC's handlers do
        KeyLock lock(ks, k, kNow);
        lock.set(k, ValueRef::copy_of(std::to_string(read_num(lock, k) + 1)), 0);
      }
    }
  };
  std::thread w1(writer), w2(writer);
  int torn = 0;
  for (int r = 0; r < kRounds; ++r) {
    ExecLock exec(ks, keys, false);
    KeyLock lock(ks, std::span<const std::string_view>(keys), kNow);
    const long v = read_num(lock, keys[0]);
    for (std::string_view k : keys) torn += read_num(lock, k) != v;
  }
  w1.join();
  w2.join();
  CHECK(torn == 0);
  KeyLock lock(ks, std::span<const std::string_view>(keys), kNow);
  for (std::string_view k : keys) CHECK(read_num(lock, k) == 2 * kRounds);
}
