// The app of the graphql-ws preset's tests: the real graphql-ws client (npm
// graphql-ws 6, webSocketImpl ws 8) pointed at tether (argv[2]), with
// retryAttempts 0 (any close is final) and keepAlive pings every argv[3] ms.
// Like the ping/pong timeout recipe of graphql-ws's README, it gives up on
// the connection when a pong does not come within argv[4] ms: it prints
// {"event":"keepalive-timeout"} and closes its socket with 4408.
// It prints one JSON line per event: connected, ack (every connection_ack
// the client receives), ping, pong, next/op-error/complete of an operation
// (with the test's own id), close (the client's closed event).
// Commands on stdin: {"cmd":"run","id":"x","query":"..."} starts an
// operation, {"cmd":"dispose","id":"x"} ends it from the app's side.
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [url, keepAlive, pongWait] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
let socket, pongTimer;

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  retryAttempts: 0,
  lazy: false,
  keepAlive,
  on: {
    connected: (s) => { socket = s; print({ event: 'connected', protocol: s.protocol }); },
    message: (m) => { if (m.type === 'connection_ack') print({ event: 'ack' }); },
    ping: (received) => {
      if (received) return;
      print({ event: 'ping' });
      pongTimer = setTimeout(() => {
        print({ event: 'keepalive-timeout' });
        if (socket && socket.readyState === WebSocket.OPEN) socket.close(4408, 'Request Timeout');
      }, pongWait);
    },
    pong: (received) => { if (received) { clearTimeout(pongTimer); print({ event: 'pong' }); } },
    closed: (e) => print({ event: 'close', code: e && e.code, reason: e && e.reason }),
  },
});

const ops = new Map();
const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = JSON.parse(line);
  if (cmd.cmd === 'run') {
    const dispose = client.subscribe({ query: cmd.query }, {
      next: (v) => print({ event: 'next', id: cmd.id, data: JSON.stringify(v.data ?? null) }),
      error: (e) => print({ event: 'op-error', id: cmd.id, message: JSON.stringify(e) }),
      complete: () => print({ event: 'complete', id: cmd.id }),
    });
    ops.set(cmd.id, dispose);
  } else if (cmd.cmd === 'dispose') {
    ops.get(cmd.id)?.();
  }
});
rl.on('close', () => process.exit(0));
