// MULTI/EXEC from Node.js's two Redis clients, as an application writes it: ioredis's
// multi().set().incr().exec() and node-redis's multi()...exec(), plus a transaction aborted by a
// WATCHed key another client changed. Used by tests/integration/test_transactions.py, which runs
// it against stratakv and redis-server and compares the printed results.
//
// usage: node transactions.mjs <host:port> <ioredis|node-redis>
// Prints one JSON line {client, plain, errors, watched}.
import Redis from "ioredis";
import { createClient } from "redis";

const [addr, which] = process.argv.slice(2);
const [host, port] = addr.split(":");
const show = (v) => (v instanceof Error ? `error: ${v.message}` : v);

async function withIoredis() {
  const r = new Redis({ host, port: Number(port), lazyConnect: true });
  const other = new Redis({ host, port: Number(port), lazyConnect: true });
  await r.connect();
  await other.connect();
  await r.del("n:k", "n:s", "n:w");
  const plain = await r.multi().set("n:k", "1").incr("n:k").get("n:k").exec();
  const errors = await r.multi().set("n:s", "x").incr("n:s").get("n:s").exec();
  await r.set("n:w", "1");
  await r.watch("n:w");
  await other.set("n:w", "2");
  const watched = await r.multi().incr("n:w").exec();
  r.disconnect();
  other.disconnect();
  return {
    plain: plain.map(([e, v]) => show(e ?? v)),
    errors: errors.map(([e, v]) => show(e ?? v)),
    watched,
  };
}

async function withNodeRedis() {
  const url = `redis://${host}:${port}`;
  const r = createClient({ url });
  const other = createClient({ url });
  await r.connect();
  await other.connect();
  await r.del(["n:k", "n:s", "n:w"]);
  const plain = await r.multi().set("n:k", "1").incr("n:k").get("n:k").exec();
  let errors;
  try {
    errors = await r.multi().set("n:s", "x").incr("n:s").get("n:s").exec();
  } catch (e) {
    errors = (e.replies ?? [e]).map(show);
  }
  await r.set("n:w", "1");
  await r.watch("n:w");
  await other.set("n:w", "2");
  let watched;
  try {
    watched = await r.multi().incr("n:w").exec();
  } catch (e) {
    watched = `aborted: ${e.constructor.name}`;
  }
  await r.quit();
  await other.quit();
  return { plain: plain.map(show), errors: errors.map(show), watched };
}

const result = which === "ioredis" ? await withIoredis() : await withNodeRedis();
console.log(JSON.stringify({ client: which, ...result }));
