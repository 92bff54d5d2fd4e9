// A steady load on a Redis Cluster from ioredis's Cluster, as an application keeps one while
// the cluster changes under it (slot migration: tests/integration/test_rebalance.py): SET then
// GET of a rolling set of keys, each value checked byte for byte, until stdin closes. Every
// error the client surfaces counts (a -MOVED is followed by the client and is not one).
//
// usage: node cluster_load.mjs <host:port>[,<host:port>...] <keys>
// Prints one JSON line {ops, errors, mismatches, first_error} when stdin closes; exit 0 when
// there was no error and no mismatch.
import { createHash } from "node:crypto";
import { Cluster } from "ioredis";

const [seedsArg, keysArg] = process.argv.slice(2);
const seeds = seedsArg.split(",").map((s) => {
  const [host, port] = s.split(":");
  return { host, port: Number(port) };
});
const n = Number(keysArg);
const value = (k, gen) => createHash("sha256").update(`${k}:${gen}`).digest("hex").repeat(1 + (gen % 30));

const c = new Cluster(seeds, { redisOptions: { connectTimeout: 5000 }, maxRedirections: 64 });
let running = true;
process.stdin.on("end", () => { running = false; });
process.stdin.on("close", () => { running = false; });
process.stdin.resume();

const result = { ops: 0, errors: 0, mismatches: 0, first_error: null };
let gen = 0;
while (running) {
  const k = `ioredis-load:${gen % n}`;
  const v = value(k, gen);
  try {
    await c.set(k, v);
    const got = await c.get(k);
    if (got !== v) {
      result.mismatches++;
      result.first_error = result.first_error || `${k}: read ${got === null ? "nil" : got.length + " bytes"}`;
    }
    result.ops += 2;
  } catch (e) {
    result.errors++;
    result.first_error = result.first_error || String(e);
  }
  gen++;
}
c.disconnect();
console.log(JSON.stringify(result));
process.exit(result.errors === 0 && result.mismatches === 0 ? 0 : 1);
