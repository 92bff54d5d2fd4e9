// bench/kvbench/backend.h - how a request stream talks to the cache: one interface, one
// connection per stream, two protocols.
//
//   resp   pipelined EXISTS (lookup), GET (load), SET (store) over TCP or a Unix socket; works
//          against redis-server and any other Redis-protocol server
//   fast   stratakv's fast path over the Unix socket (docs/fast-path.md): the stream's buffers
//          live in one memfd segment registered with KV.REGISTER SHM; KV.PREFIX [PIN] (lookup),
//          KV.MGET (load) and KV.MPUT (store) name slots of it, and the server copies the bytes
//
// Each backend owns its stream's buffers: `slots()` load slots and as many store slots of
// `value_bytes()` each, so a load lands where the caller checks it and a store sends what the
// caller stamped, with no copy in the client.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "options.h"

namespace kvbench {

/// The outcome of one key of a load or store batch.
struct KeyResult {
  enum class Status : uint8_t {
    kOk,           ///< loaded or stored, value_bytes() bytes
    kMiss,         ///< load: the key does not exist
    kWrongLength,  ///< load: the value has another length (`length`); nothing usable loaded
    kError,        ///< the server refused this key; `error` holds its reply
  };
  Status status = Status::kOk;
  uint64_t length = 0;
  std::string error;
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// "resp" or "fast".
  virtual const char* name() const = 0;
  size_t slots() const { return slots_; }
  size_t value_bytes() const { return value_bytes_; }
  /// Load slot i (value_bytes() bytes): load() writes keys[i] here.
  std::byte* load_slot(size_t i) const { return load_base_ + i * value_bytes_; }
  /// Store slot i (value_bytes() bytes): store() sends it as the value of keys[i].
  std::byte* store_slot(size_t i) const { return store_base_ + i * value_bytes_; }

  /// How many leading keys of the chain exist (keys 0..n-1 exist, key n does not). The fast
  /// backend leases them (KV.PREFIX ... PIN) when --pin-ms is on.
  virtual size_t lookup(std::span<const std::string> keys) = 0;
  /// Loads keys[i] into load slot i, for i < keys.size() <= slots(); one result per key.
  virtual void load(std::span<const std::string> keys, std::vector<KeyResult>& results) = 0;
  /// Stores store slot i under keys[i], for i < keys.size() <= slots(); one result per key.
  virtual void store(std::span<const std::string> keys, std::vector<KeyResult>& results) = 0;
  /// The keys of the last lookup are loaded: the fast backend releases their leases
  /// (KV.UNPIN, sent in front of the next command: no round trip of its own).
  virtual void release(std::span<const std::string> /*keys*/) {}

 protected:
  Backend(size_t slots, size_t value_bytes) : slots_(slots), value_bytes_(value_bytes) {}
  size_t slots_;
  size_t value_bytes_;
  std::byte* load_base_ = nullptr;
  std::byte* store_base_ = nullptr;
};

/// Connects one stream's backend for --protocol, with `slots` buffer slots per direction of
/// `value_bytes` each (memory touched before it returns). Throws IoError when the server
/// cannot be reached or refuses the setup (AUTH, KV.REGISTER).
std::unique_ptr<Backend> make_backend(const Options& o, size_t slots, size_t value_bytes);
std::unique_ptr<Backend> make_resp_backend(const Options& o, size_t slots, size_t value_bytes);
std::unique_ptr<Backend> make_fast_backend(const Options& o, size_t slots, size_t value_bytes);

}  // namespace kvbench
