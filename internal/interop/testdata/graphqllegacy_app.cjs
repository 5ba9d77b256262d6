// The app of the graphql-ws-legacy preset's tests: the real
// subscriptions-transport-ws client (npm subscriptions-transport-ws 0.11,
// its SubscriptionClient on ws 8) pointed at tether (argv[2]), with
// reconnect false (any close is final) and timeout argv[3] ms: the client
// closes its socket when no ka came from the server for that long.
// It prints one JSON line per event: connected (the first connection_ack),
// ack (every connection_ack the client receives), ka (every ka), next/
// op-error/complete of an operation (with the test's own id), close (the
// client's disconnected event).
// Commands on stdin: {"cmd":"run","id":"x","query":"..."} starts an
// operation, {"cmd":"dispose","id":"x"} ends it from the app's side.
const { createInterface } = require('node:readline');
const WebSocket = require('ws');
const { SubscriptionClient } = require('subscriptions-transport-ws');

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [url, timeout] = [process.argv[2], Number(process.argv[3])];

const client = new SubscriptionClient(url, { reconnect: false, lazy: false, timeout }, WebSocket);
// Every message the client receives, seen before the client handles it.
const handle = client.processReceivedData.bind(client);
client.processReceivedData = (data) => {
  let m;
  try { m = JSON.parse(String(data)); } catch { m = {}; }
  if (m.type === 'connection_ack') print({ event: 'ack' });
  if (m.type === 'ka') print({ event: 'ka' });
  return handle(data);
};
client.onConnected(() => print({ event: 'connected', protocol: client.client && client.client.protocol }));
client.onDisconnected(() => print({ event: 'close' }));

const ops = new Map();
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = JSON.parse(line);
  if (cmd.cmd === 'run') {
    const sub = client.request({ query: cmd.query }).subscribe({
      next: (v) => print({ event: 'next', id: cmd.id, data: JSON.stringify(v.data ?? null) }),
      error: (e) => print({ event: 'op-error', id: cmd.id, message: JSON.stringify(e) }),
      complete: () => print({ event: 'complete', id: cmd.id }),
    });
    ops.set(cmd.id, sub);
  } else if (cmd.cmd === 'dispose') {
    ops.get(cmd.id)?.unsubscribe();
  }
});
rl.on('close', () => process.exit(0));
