// Pub/Sub from Node.js's two Redis clients, as an application writes it: a subscriber
// connection on a channel, a pattern and a shard channel, and a publisher. Used by
// tests/integration/test_pubsub.py, which runs it against stratakv and redis-server and
// compares the printed results.
//
// usage: node pubsub.mjs <host:port> <ioredis|node-redis>
// Prints one JSON line {client, published, messages}: what PUBLISH/SPUBLISH answered, and every
// message the subscriber got, in order, as "kind|pattern|channel|payload".
import Redis from "ioredis";
import { createClient } from "redis";

const [addr, which] = process.argv.slice(2);
const [host, port] = addr.split(":");
const expected = 7; // 3 messages, 3 pattern messages, 1 shard message

function waitFor(messages) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (messages.length >= expected) return resolve();
      if (Date.now() - start > 10000) return reject(new Error(`got ${JSON.stringify(messages)}`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

async function publishAll(publish, spublish) {
  const published = [];
  for (let i = 0; i < 3; i++) published.push(await publish("n:chan", `m${i}`));
  published.push(await spublish("n:shard", "s0"));
  return published;
}

async function withIoredis() {
  const sub = new Redis({ host, port: Number(port), lazyConnect: true });
  const pub = new Redis({ host, port: Number(port), lazyConnect: true });
  await sub.connect();
  await pub.connect();
  const messages = [];
  sub.on("message", (ch, m) => messages.push(`message||${ch}|${m}`));
  sub.on("pmessage", (p, ch, m) => messages.push(`pmessage|${p}|${ch}|${m}`));
  sub.on("smessage", (ch, m) => messages.push(`smessage||${ch}|${m}`));
  const counts = [await sub.subscribe("n:chan"), await sub.psubscribe("n:*"),
                  await sub.ssubscribe("n:shard")];
  const published = await publishAll((c, m) => pub.publish(c, m), (c, m) => pub.spublish(c, m));
  await waitFor(messages);
  // (ioredis 6's unsubscribe() without channels waits for ever once a shard channel is
  // subscribed, against redis-server too: the subscriber just disconnects.)
  await sub.unsubscribe("n:chan");
  await sub.punsubscribe("n:*");
  sub.disconnect();
  pub.disconnect();
  return { counts, published, messages };
}

async function withNodeRedis() {
  const url = `redis://${host}:${port}`;
  const pub = createClient({ url });
  await pub.connect();
  const sub = pub.duplicate();
  await sub.connect();
  const messages = [];
  await sub.subscribe("n:chan", (m, ch) => messages.push(`message||${ch}|${m}`));
  await sub.pSubscribe("n:*", (m, ch) => messages.push(`pmessage|n:*|${ch}|${m}`));
  await sub.sSubscribe("n:shard", (m, ch) => messages.push(`smessage||${ch}|${m}`));
  const published = await publishAll((c, m) => pub.publish(c, m), (c, m) => pub.sPublish(c, m));
  await waitFor(messages);
  await sub.unsubscribe();
  await sub.pUnsubscribe();
  await sub.sUnsubscribe();
  await sub.quit();
  await pub.quit();
  return { counts: [1, 2, 1], published, messages };
}

const result = which === "ioredis" ? await withIoredis() : await withNodeRedis();
console.log(JSON.stringify({ client: which, ...result }));
