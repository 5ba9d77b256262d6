// The app of the STOMP preset's tests: the real @stomp/stompjs 7 client
// (webSocketFactory: ws 8, node 20 has no WebSocket of its own) pointed at
// tether (argv[2]), with reconnectDelay 0 (any close is final) and
// heart-beats both ways every argv[3] ms: stompjs closes its socket when
// the server is silent for twice that.
// It prints one JSON line per event: connected (every CONNECTED the client
// receives), message (sub, the destination, body, redelivered), receipt
// (id), stomp-error (an ERROR frame, message), heartbeat-lost, close (the
// client's WebSocket closed: code, reason).
// Commands on stdin: {"cmd":"subscribe","id":"s","dest":"/topic/x","ack":"auto"},
// {"cmd":"unsubscribe","id":"s"}, {"cmd":"send","dest":"/queue/x","body":"b","receipt":"r"}
// (persistent, with a receipt header when receipt is set),
// {"cmd":"ack","body":"b","which":0} and {"cmd":"nack",...} settle the
// which-th message received with that body (0: the first).
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { Client } from '@stomp/stompjs';

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [url, beat] = [process.argv[2], Number(process.argv[3])];

const client = new Client({
  webSocketFactory: () => new WebSocket(url, ['v12.stomp', 'v11.stomp', 'v10.stomp']),
  reconnectDelay: 0,
  heartbeatIncoming: beat,
  heartbeatOutgoing: beat,
  debug: process.env.STOMP_DEBUG ? (m) => process.stderr.write(Date.now() % 100000 + ' ' + m + '\n') : () => {},
});
const subs = new Map();
const received = new Map(); // body → the messages with it, in order
const onMessage = (id) => (m) => {
  received.set(m.body, [...(received.get(m.body) ?? []), m]);
  print({ event: 'message', sub: id, dest: m.headers.destination, body: m.body, redelivered: m.headers.redelivered === 'true' });
};
client.onConnect = (frame) => print({ event: 'connected', version: frame.headers.version });
client.onUnhandledMessage = (m) => print({ event: 'message', sub: m.headers.subscription, dest: m.headers.destination, body: m.body, unhandled: true });
client.onUnhandledReceipt = (f) => print({ event: 'receipt', id: f.headers['receipt-id'], unhandled: true });
client.onStompError = (f) => print({ event: 'stomp-error', message: f.headers.message || f.body });
client.onHeartbeatLost = () => print({ event: 'heartbeat-lost' });
client.onWebSocketClose = (e) => print({ event: 'close', code: e.code, reason: e.reason });

const commands = {
  subscribe: (c) => subs.set(c.id, client.subscribe(c.dest, onMessage(c.id), { id: c.id, ack: c.ack || 'auto' })),
  unsubscribe: (c) => { subs.get(c.id)?.unsubscribe(); subs.delete(c.id); },
  send: (c) => {
    const headers = { persistent: 'true' };
    if (c.receipt) {
      headers.receipt = c.receipt;
      client.watchForReceipt(c.receipt, () => print({ event: 'receipt', id: c.receipt }));
    }
    client.publish({ destination: c.dest, body: c.body, headers });
  },
  ack: (c) => received.get(c.body)?.[c.which ?? 0]?.ack(),
  nack: (c) => received.get(c.body)?.[c.which ?? 0]?.nack(),
};
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const c = JSON.parse(line);
  commands[c.cmd](c);
});
rl.on('close', () => process.exit(0));
client.activate();
