'use strict';
// A WebSocket server built on the `ws` package (npm), the most used Node.js
// implementation, for tether's interop tests. It echoes every message with its
// type (text stays text, binary stays binary), accepts the subprotocol
// "v1.feed" when a client offers it, and obeys commands that the Go test writes
// to stdin, one JSON object a line:
//
//   {"cmd":"feed","from":1,"every_ms":10}   push {"seq":n} text messages to every client
//   {"cmd":"close","code":1008,"reason":"bad"}  close every client with that code
//   {"cmd":"ping"}                              ping every client; each pong is reported
//   {"cmd":"send_fragments","parts":["a","b"]}  send every client one text message in that many frames
//   {"cmd":"burst","count":1000}                send every client that many JSON trade messages at once
//   {"cmd":"stats"}                             report each client socket's bytes written and read
//
// It reports on stdout, one JSON object a line: listening, connection (with the
// negotiated extensions), message, pong, close, stats (after a burst is
// written: "burst_done"). It exits when stdin ends, so it cannot outlive the
// test that started it.
//
// Usage: node node_server.js [--port N] [--deflate]
//   N = 0 or absent: an ephemeral port. --deflate accepts permessage-deflate
//   (ws' perMessageDeflate, its defaults but a threshold of 0: every message
//   is compressed, with context takeover).

const crypto = require('crypto');
const readline = require('readline');
const { WebSocketServer, WebSocket } = require('ws');

function arg(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

function emit(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

// describe reports a message without printing a megabyte: text verbatim,
// binary as its size and SHA-256.
function describe(data, isBinary) {
  if (!isBinary) return { type: 'text', data: data.toString('utf8') };
  const digest = crypto.createHash('sha256').update(data).digest('hex');
  return { type: 'binary', size: data.length, sha256: digest };
}

const wss = new WebSocketServer({
  host: '127.0.0.1',
  port: Number(arg('port', '0')),
  maxPayload: 64 << 20,
  handleProtocols: (protocols) => (protocols.has('v1.feed') ? 'v1.feed' : false),
  perMessageDeflate: process.argv.includes('--deflate') ? { threshold: 0 } : false,
});

wss.on('listening', () => {
  emit({ event: 'listening', port: wss.address().port, version: require('ws/package.json').version });
});

wss.on('error', (err) => {
  emit({ event: 'error', message: String(err && err.message) });
  process.exit(1);
});

wss.on('connection', (ws, req) => {
  emit({
    event: 'connection', protocol: ws.protocol, origin: req.headers.origin || '', path: req.url,
    extensions: ws.extensions, offered: req.headers['sec-websocket-extensions'] || '',
  });
  ws.on('message', (data, isBinary) => {
    emit(Object.assign({ event: 'message' }, describe(data, isBinary)));
    ws.send(data, { binary: isBinary });
  });
  ws.on('pong', (data) => emit({ event: 'pong', data: data.toString('utf8') }));
  ws.on('close', (code, reason) => emit({ event: 'close', code, reason: reason.toString() }));
  ws.on('error', (err) => emit({ event: 'error', message: String(err && err.message) }));
});

let feed = null;

function startFeed(from, everyMs) {
  clearInterval(feed);
  let seq = from;
  feed = setInterval(() => {
    for (const client of wss.clients) {
      if (client.readyState === WebSocket.OPEN) client.send(JSON.stringify({ seq }));
    }
    seq++;
  }, everyMs);
}

// sendFragments sends one text message as a frame per part (RFC 6455 §5.4).
function sendFragments(parts) {
  for (const client of wss.clients) {
    parts.forEach((part, i) => client.send(part, { binary: false, fin: i === parts.length - 1 }));
  }
}

// burst sends count JSON trade messages, a market data feed's shape.
function burst(count) {
  let pending = 0;
  for (const client of wss.clients) {
    for (let seq = 1; seq <= count; seq++) {
      const trade = {
        type: 'trade', channel: 'prices', symbol: 'EURUSD', seq,
        price: 1.08 + (seq % 97) / 10000, size: 100 + (seq % 13), side: seq % 2 ? 'buy' : 'sell', venue: 'primary',
      };
      pending++;
      client.send(JSON.stringify(trade), () => { if (--pending === 0) emit({ event: 'burst_done', count }); });
    }
  }
}

function stats() {
  for (const client of wss.clients) {
    emit({ event: 'stats', written: client._socket.bytesWritten, read: client._socket.bytesRead, extensions: client.extensions });
  }
}

function closeAll(code, reason) {
  clearInterval(feed);
  for (const client of wss.clients) client.close(code, reason);
}

const commands = readline.createInterface({ input: process.stdin });
commands.on('line', (line) => {
  const c = JSON.parse(line);
  if (c.cmd === 'feed') startFeed(c.from, c.every_ms);
  else if (c.cmd === 'close') closeAll(c.code, c.reason);
  else if (c.cmd === 'ping') for (const client of wss.clients) client.ping('upstream?');
  else if (c.cmd === 'send_fragments') sendFragments(c.parts);
  else if (c.cmd === 'burst') burst(c.count);
  else if (c.cmd === 'stats') stats();
  else emit({ event: 'error', message: 'unknown command ' + line });
});
commands.on('close', () => process.exit(0));
