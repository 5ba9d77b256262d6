'use strict';
// A WebSocket client built on the `ws` package (npm) for tether's interop
// tests: a naive app that connects once and reports everything it sees. It obeys
// commands that the Go test writes to stdin, one JSON object a line:
//
//   {"cmd":"send","text":"..."}             send a text message
//   {"cmd":"send_binary","size":1048576}    send that many random bytes as binary
//   {"cmd":"send_fragments","parts":["a","b"]}  send one text message in that many frames
//   {"cmd":"ping"}                          send a ping; a pong is reported
//   {"cmd":"close","code":1000,"reason":""} start the closing handshake
//
// It reports on stdout, one JSON object a line: open (with the negotiated
// subprotocol), message, sent, pong, close (code and reason), error. It exits
// when stdin ends, so it cannot outlive the test that started it.
//
// Usage: node node_client.js --url ws://... [--protocols a,b] [--origin http://...]

const crypto = require('crypto');
const readline = require('readline');
const { WebSocket } = require('ws');

function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

function emit(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

function describe(data, isBinary) {
  if (!isBinary) return { type: 'text', data: data.toString('utf8') };
  const digest = crypto.createHash('sha256').update(data).digest('hex');
  return { type: 'binary', size: data.length, sha256: digest };
}

const protocols = arg('protocols', '').split(',').filter((p) => p !== '');
const options = { maxPayload: 64 << 20 };
const origin = arg('origin', '');
if (origin !== '') options.origin = origin;

const ws = new WebSocket(arg('url'), protocols, options);
ws.on('open', () => emit({ event: 'open', protocol: ws.protocol, version: require('ws/package.json').version }));
ws.on('message', (data, isBinary) => emit(Object.assign({ event: 'message' }, describe(data, isBinary))));
ws.on('pong', (data) => emit({ event: 'pong', data: data.toString('utf8') }));
ws.on('close', (code, reason) => emit({ event: 'close', code, reason: reason.toString() }));
ws.on('error', (err) => emit({ event: 'error', message: String(err && err.message) }));

// sendFragments sends one text message as a frame per part (RFC 6455 §5.4).
function sendFragments(parts) {
  parts.forEach((part, i) => ws.send(part, { binary: false, fin: i === parts.length - 1 }));
}

function sendBinary(size) {
  const data = crypto.randomBytes(size);
  emit(Object.assign({ event: 'sent' }, describe(data, true)));
  ws.send(data, { binary: true });
}

const commands = readline.createInterface({ input: process.stdin });
commands.on('line', (line) => {
  const c = JSON.parse(line);
  if (c.cmd === 'send') ws.send(c.text);
  else if (c.cmd === 'send_binary') sendBinary(c.size);
  else if (c.cmd === 'send_fragments') sendFragments(c.parts);
  else if (c.cmd === 'ping') ws.ping('tether?');
  else if (c.cmd === 'close') ws.close(c.code, c.reason);
  else emit({ event: 'error', message: 'unknown command ' + line });
});
commands.on('close', () => process.exit(0));
