// Drives a Redis Cluster with Node.js's two Redis clients, as an application would: ioredis's
// Cluster and node-redis's createCluster each learn the slot map from a seed, write N keys and
// read them back, checking every value byte for byte. Used by
// tests/integration/test_cluster_clients.py against stratakv nodes (and redis-server's
// behaviour is the reference these clients were written for).
//
// usage: node cluster_roundtrip.mjs <host:port>[,<host:port>...] <keys> <ioredis|node-redis>
// Prints one JSON line {client, keys, ok, mismatches, first_error}; exit 0 when every value
// read back equals what was written.
import { createHash } from "node:crypto";
import { Cluster } from "ioredis";
import { createCluster } from "redis";

const [seedsArg, keysArg, which] = process.argv.slice(2);
const seeds = seedsArg.split(",").map((s) => {
  const [host, port] = s.split(":");
  return { host, port: Number(port) };
});
const n = Number(keysArg);
const prefix = `${which}:${process.pid}:`;
const key = (i) => `${prefix}${i}`;
// A value of its own per key, 64 to 448 bytes.
const value = (i) => createHash("sha256").update(key(i)).digest("hex").repeat(1 + (i % 7));

async function roundtrip(set, get) {
  let mismatches = 0;
  for (let start = 0; start < n; start += 500) {
    const batch = [];
    for (let i = start; i < Math.min(n, start + 500); i++) batch.push(set(key(i), value(i)));
    await Promise.all(batch);
  }
  for (let start = 0; start < n; start += 500) {
    const idx = [];
    for (let i = start; i < Math.min(n, start + 500); i++) idx.push(i);
    const got = await Promise.all(idx.map((i) => get(key(i))));
    idx.forEach((i, j) => {
      if (got[j] !== value(i)) mismatches++;
    });
  }
  return mismatches;
}

let result = { client: which, keys: n, ok: false, mismatches: -1, first_error: null };
// A failed check beyond the round trip: counted, and the first one said.
function fail(what) {
  result.mismatches++;
  result.first_error = result.first_error || what;
}
try {
  if (which === "ioredis") {
    const c = new Cluster(seeds, { enableAutoPipelining: true, redisOptions: { connectTimeout: 5000 } });
    result.mismatches = await roundtrip((k, v) => c.set(k, v), (k) => c.get(k));
    // Multi-key commands within one slot (a hash tag), and CROSSSLOT across slots.
    await c.mset("{tag}a", "1", "{tag}b", "2");
    const both = await c.mget("{tag}a", "{tag}b");
    if (both.join(",") !== "1,2") fail(`MGET {tag}a {tag}b: ${both}`);
    // Across slots the server refuses (auto-pipelining would refuse it in the client first).
    const plain = new Cluster(seeds);
    try {
      const got = await plain.mget("a", "b");
      fail(`MGET a b across slots was not refused: ${got}`);
    } catch (e) {
      if (!String(e.message).includes("CROSSSLOT")) fail(`MGET a b: ${e.message}`);
    }
    await plain.quit();
    await c.quit();
  } else {
    const c = createCluster({ rootNodes: seeds.map((s) => ({ url: `redis://${s.host}:${s.port}` })) });
    c.on("error", (e) => { result.first_error = result.first_error || String(e); });
    await c.connect();
    result.mismatches = await roundtrip((k, v) => c.set(k, v), (k) => c.get(k));
    await c.mSet([["{tag}x", "1"], ["{tag}y", "2"]]);
    const both = await c.mGet(["{tag}x", "{tag}y"]);
    if (both.join(",") !== "1,2") fail(`MGET {tag}x {tag}y: ${both}`);
    await c.quit();
  }
  result.ok = result.mismatches === 0;
} catch (e) {
  result.first_error = String(e && e.stack ? e.stack : e);
}
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);
