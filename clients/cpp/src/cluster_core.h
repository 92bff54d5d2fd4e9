// cluster_core.h - the nodes behind one Client and the map of which node serves which key.
//
// A Client on a redis:// or unix:// URL has one node that serves every slot and follows no
// redirect: its calls go straight to that node's pool. A Client on a redis+cluster:// URL
// learns the slot map from a seed (CLUSTER INFO for the topology's version, then CLUSTER
// SLOTS), keeps one connection pool (ClientCore) per primary, opened when first needed, and
// learns from what the nodes answer: -MOVED changes one slot's owner at once and refreshes the
// whole map (single flight: one refresh at a time, the others wait for it), -ASK is followed
// once without changing the map, a lost connection refreshes the map too.
//
// Map versions: a map read at a newer topology version replaces the current one; one read at
// the same version replaces it too but keeps the owners learnt from -MOVED since (a node's
// own CLUSTER SLOTS may lag behind its redirects); an older one is ignored.
//
// Reads may go to replicas (Options::read_from, read_policy.h): a replica's pool is kept apart
// from a primary's pool at the same address (its connections send READONLY after connecting),
// and is reached over its Unix socket on this host as a primary is.
//
// A node on this host is reached over its Unix socket (so the shm fast path applies): when
// the node is made, `CONFIG GET unixsocket` over TCP names the socket, and the node behind that
// path must answer CLUSTER MYID with the node's id (or, without an id, CONFIG GET port with its
// port). Options::cluster_unix_sockets turns this off.
//
// A rediss+cluster:// Client reaches every node over TLS, as its seeds: asked over TLS, a node's
// CLUSTER SLOTS and -MOVED name the nodes' tls-ports (docs/tls.md), and no Unix socket is tried
// (the bytes stay encrypted end to end; the fast path is not used).
//
// Thread-safe. No lock is held across I/O: making a node and refreshing the map run outside
// the locks; whoever needs the same node or refresh meanwhile waits for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core.h"
#include "read_policy.h"
#include "slot_map.h"
#include "task_pool.h"

namespace stratakv::detail {

class ClusterCore {
 public:
  /// One server (a redis:// or unix:// URL): call start() next.
  ClusterCore(Url url, Options options);
  /// A cluster, reached first through `seeds`: call start() next.
  ClusterCore(std::vector<Url> seeds, Options options);
  ~ClusterCore();

  /// One server: connects and settles the transport. A cluster: reads the map from the first
  /// seed that answers (a seed outside cluster mode becomes the one node serving every slot)
  /// and connects to every primary, and every replica when reads use them (a node that fails
  /// now is retried when used). Throws Error:
  /// kConnection when no seed answers, kServer for an error reply (NOAUTH, ...).
  void start();

  /// Whether this is a redis+cluster:// client (routes by slot, follows redirects).
  bool cluster() const { return cluster_; }
  ClientShared& shared() { return *shared_; }
  const Options& options() const { return shared_->options(); }
  TaskPool& pool() { return pool_; }
  /// "verbs", "shm" or "resp": the transport of the node(s) connected, or "mixed".
  std::string_view transport();

  /// Where reads go (Options::read_from, or the URL's read_from when that is kPrimary; always
  /// kPrimary on a one-server client).
  ReadPolicy& reads() { return reads_; }

  /// The one node of a one-server client.
  ClientCore& only() { return *only_; }

  /// The current map (never null after start()).
  std::shared_ptr<const SlotMap> map() const;
  /// The pool of the node at `a`, made (connected) on first use. Throws Error(kConnection)
  /// when it cannot be reached.
  std::shared_ptr<ClientCore> node(const NodeAddress& a) { return node(a, false); }
  /// The read pool of the replica at `a` (its connections send READONLY), made on first use.
  /// Throws as node().
  std::shared_ptr<ClientCore> replica(const NodeAddress& a) { return node(a, true); }
  /// Nodes learnt from replies: the owners that -MOVED named (a redirect's empty host is
  /// `from`'s). Changes the map at once, then refreshes it from `from` (the node that
  /// answered), unless the map changed since `seen` (a map() taken before the call).
  void learn_moved(std::span<const Redirect> moved, const NodeAddress& from,
                   const std::shared_ptr<const SlotMap>& seen);
  /// A node could not be reached (`failed`): forgets its pool (made afresh, connections and
  /// transport, when next used: the server may have restarted) and refreshes the map from the
  /// other nodes and the seeds (unless the map changed since `seen`, a map() taken before).
  /// `replica`: the failed pool is the replica read pool of `failed` (replica()).
  void node_failed(const NodeAddress& failed, const std::shared_ptr<const SlotMap>& seen,
                   bool replica = false);

 private:
  std::shared_ptr<ClientCore> node(const NodeAddress& a, bool readonly);
  /// Connects a pool; with kNearest, times one PING on it (ReadPolicy::record).
  std::shared_ptr<ClientCore> make_node(const NodeAddress& a, bool readonly);
  /// The node's Url: its Unix socket when it is on this host, else TCP (TLS for a rediss+cluster://
  /// Client, never a Unix socket then).
  Url node_url(const NodeAddress& a);
  /// Reads the map through `s`; nullopt when the server is not in cluster mode.
  std::optional<SlotMap> fetch_map(Session& s, std::string_view host);
  /// Reads the map from `first`, then the other nodes (never `avoid`), then the seeds, over a
  /// connection of its own, and applies it. Single flight: a call while a refresh runs waits
  /// for it instead. A node that fails is skipped; when all fail the map stays.
  void refresh(const NodeAddress* first, const NodeAddress* avoid);
  /// Applies a map read at `m.version()` (see the rules above).
  void apply(SlotMap m);

  const bool cluster_;
  const std::vector<Url> seeds_;  // cluster: the seeds; one server: its Url
  std::shared_ptr<ClientShared> shared_;
  std::shared_ptr<ClientCore> only_;  // one server
  TaskPool pool_;
  ReadPolicy reads_;

  mutable std::mutex mu_;
  std::shared_ptr<const SlotMap> map_;
  std::map<uint16_t, std::pair<std::string, int>> learnt_;  // slot -> owner from -MOVED
  // by address; a replica's read pool by "ro " + address
  std::map<std::string, std::shared_future<std::shared_ptr<ClientCore>>> nodes_;
  bool refreshing_ = false;
  std::condition_variable refreshed_;
};

}  // namespace stratakv::detail
