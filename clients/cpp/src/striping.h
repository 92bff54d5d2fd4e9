// striping.h - values that a put asked to stripe (PutOptions::stripes), over routed_ops.h.
//
// Put: the parts are written first, all at once (one batch, split by node and run in
// parallel), with a TTL; then the manifest, under the value's key, with the same deadline
// (never later than the parts'). A put that dies leaves parts that expire; two puts of one key
// write parts of two versions, and the manifest that wins names only its own. TTL rule: a
// striped value always expires: at PutOptions::ttl_ms, or else Options::stripe_ttl_ms.
//
// Get: every read of a value (get_into, batch_get_into, get_with) reads the key as usual; a
// value that is a manifest (stripe_format.h) is replaced by its parts, read all at once into
// the caller's window (no copy but the transport's). A missing part, a part of another length,
// or a manifest that does not decode is a miss, never a torn value (the window may then hold
// some parts' bytes).
//
// Thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cluster_core.h"
#include "transport.h"

namespace stratakv::detail {

/// Stores items[i] (striped when options.stripes asks and the value is large enough; see
/// stripe::plan); Result i for item i.
std::vector<Result> put_values(ClusterCore& cc, std::span<const PutItem> items, const PutOptions& options);
/// Reads items[i] into its window, parts of striped values too; Result i for item i (kOk with
/// the value's length, kMiss, or kError).
std::vector<Result> get_values(ClusterCore& cc, std::span<const GetItem> items);
/// Reads a value of unknown length into alloc(length), parts of a striped value too. A value
/// that may be a manifest (at most about 4 KiB) is read into a small buffer first, then copied
/// to alloc's memory. nullopt when missing (alloc may have been called for a striped value
/// whose part is missing).
std::optional<size_t> get_value_with(ClusterCore& cc, std::string_view key, const Allocator& alloc);

}  // namespace stratakv::detail
