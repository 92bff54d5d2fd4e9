// cluster/topology_file.h - a topology kept in a file: the static topology of a node without
// etcd (`cluster.topology-file`) and the copy a node saves of the last topology etcd gave it.
// Both hold exactly what cluster/topology.h's encode() writes (plus a newline), so a record
// copied out of etcd serves as a static topology and the other way round.
#pragma once

#include <string>

#include "cluster/topology.h"

namespace cluster {

/// Reads and decodes the topology in `path`. Throws TopologyError naming the path when the file
/// cannot be read or does not decode (see decode()). Thread-safe (no shared state).
Topology load_topology_file(const std::string& path);

/// Writes `topology` to `path` atomically: encode() into "<path>.tmp.<pid>", fsync, rename over
/// `path`, fsync the directory. A crash leaves the old file or the new one, never a torn one.
/// Throws TopologyError (with errno's text) on any I/O failure, leaving `path` as it was.
/// Concurrent calls for one path must be serialised by the caller.
void save_topology_file(const std::string& path, const Topology& topology);

}  // namespace cluster
