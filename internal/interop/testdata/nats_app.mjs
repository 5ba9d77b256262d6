// The app of the NATS preset's tests: the real nats.ws 1 client pointed at
// tether (argv[2]), with reconnect off (any close is final) and a PING
// every argv[3] ms, the connection given up as stale after two
// unanswered. node 20 has no WebSocket of its own: ws 8 stands in, and
// counts the INFO operations the client receives.
// It prints one JSON line per event: connected, info (an INFO received),
// msg (sub, subject, data), flushed (id), status (type, data: the
// client's status events), close (the client closed, with its error).
// Commands on stdin: {"cmd":"sub","id":"s","subject":"x"},
// {"cmd":"unsub","id":"s"}, {"cmd":"pub","subject":"x","data":"d"},
// {"cmd":"subpub","id":"s","subject":"x","data":"d"} (both in one
// WebSocket message), {"cmd":"flush","id":"f"}.
import { createInterface } from 'node:readline';
import WebSocket from 'ws';

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
globalThis.WebSocket = class extends WebSocket {
  constructor(...args) {
    super(...args);
    this.on('message', (d) => {
      if (Buffer.from(d).subarray(0, 5).toString().toUpperCase() === 'INFO ') print({ event: 'info' });
    });
  }
};
const { connect, StringCodec } = await import('nats.ws');
const [url, pingInterval] = [process.argv[2], Number(process.argv[3])];
const sc = StringCodec();
const nc = await connect({ servers: url, reconnect: false, pingInterval, maxPingOut: 2 });
print({ event: 'connected' });
nc.closed().then((err) => print({ event: 'close', message: err ? String(err) : '' }));
(async () => {
  for await (const s of nc.status()) print({ event: 'status', type: String(s.type), data: JSON.stringify(s.data ?? null) });
})();

const subs = new Map();
const subscribe = (id, subject) => {
  const sub = nc.subscribe(subject, {
    callback: (err, m) => { if (!err) print({ event: 'msg', sub: id, subject: m.subject, data: sc.decode(m.data) }); },
  });
  subs.set(id, sub);
};
const commands = {
  sub: (c) => subscribe(c.id, c.subject),
  unsub: (c) => { subs.get(c.id)?.unsubscribe(); subs.delete(c.id); },
  pub: (c) => nc.publish(c.subject, sc.encode(c.data)),
  subpub: (c) => { subscribe(c.id, c.subject); nc.publish(c.subject, sc.encode(c.data)); },
  flush: (c) => nc.flush().then(() => print({ event: 'flushed', id: c.id })),
};
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => { const c = JSON.parse(line); commands[c.cmd](c); });
rl.on('close', () => process.exit(0));
