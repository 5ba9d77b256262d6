// An MQTT client of the mqtt preset's tests: the real mqtt.js client (npm
// mqtt 5) connected to argv[2] with protocolVersion argv[3] (4 is MQTT
// 3.1.1, 5 is MQTT 5), keepalive argv[4] seconds, reconnectPeriod argv[5] ms
// (0: any close is final, as the app; the witness reconnects) and clientId
// argv[6]; argv[7] "persistent" asks for a session the broker keeps
// (clean false, and in MQTT 5 a session expiry of 300 s).
// It prints one JSON line per event: connect (every CONNACK the client
// takes as a connection), message (topic and payload), subscribed,
// unsubscribed and published (once acknowledged; QoS 0 once written),
// pingresp and suback (each received, the resubscriptions of a reconnect
// included), disconnect (an MQTT 5 DISCONNECT from the server, with its
// reason code), close, offline, error.
// Commands on stdin: {"cmd":"sub","topic":"t","qos":1},
// {"cmd":"unsub","topic":"t"}, {"cmd":"pub","topic":"t","payload":"p","qos":1}.
import { createInterface } from 'node:readline';
import mqtt from 'mqtt';

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [url, version, keepalive, reconnectPeriod, clientId, session] = process.argv.slice(2);
const persistent = session === 'persistent';

const client = mqtt.connect(url, {
  protocolVersion: Number(version),
  keepalive: Number(keepalive),
  reconnectPeriod: Number(reconnectPeriod),
  clientId,
  clean: !persistent,
  properties: persistent && Number(version) === 5 ? { sessionExpiryInterval: 300 } : undefined,
  connectTimeout: 10000,
});
client.on('connect', (ack) => print({ event: 'connect', session: ack.sessionPresent }));
client.on('message', (topic, payload) => print({ event: 'message', topic, payload: payload.toString() }));
client.on('packetreceive', (p) => { if (p.cmd === 'pingresp' || p.cmd === 'suback') print({ event: p.cmd }); });
client.on('disconnect', (p) => print({ event: 'disconnect', reason: p.reasonCode }));
client.on('close', () => print({ event: 'close' }));
client.on('offline', () => print({ event: 'offline' }));
client.on('error', (e) => print({ event: 'error', message: String(e && e.message) }));

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const c = JSON.parse(line);
  const done = (event) => (err, granted) => print({ event, topic: c.topic, error: err ? String(err.message) : undefined,
    granted: Array.isArray(granted) ? granted.map((g) => g.qos) : undefined });
  if (c.cmd === 'sub') client.subscribe(c.topic, { qos: c.qos }, done('subscribed'));
  else if (c.cmd === 'unsub') client.unsubscribe(c.topic, done('unsubscribed'));
  else if (c.cmd === 'pub') client.publish(c.topic, c.payload, { qos: c.qos }, (err) =>
    print({ event: 'published', topic: c.topic, payload: c.payload, error: err ? String(err.message) : undefined }));
});
rl.on('close', () => process.exit(0));
