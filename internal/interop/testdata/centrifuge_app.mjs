// The app of the centrifuge preset's tests: the real centrifuge-js client
// (npm centrifuge 5, with ws 8 as its WebSocket) pointed at tether
// (argv[2]), subscribed to the channel "news". maxServerPingDelay is
// argv[3] ms: it gives a connection up when no server ping came within the
// server's ping interval plus that. Its own reconnect must never fire: it
// prints every state change, and the test fails on connecting after the
// first connected, or disconnected.
// It prints one JSON line per event: connecting, connected, disconnected
// (client), subscribing, subscribed (with recovered and wasRecovering),
// unsubscribed (subscription, with code), pub (with offset and the n of
// its data).
import WebSocket from 'ws';
import { Centrifuge } from 'centrifuge';
import { createInterface } from 'node:readline';

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [url, maxServerPingDelay] = [process.argv[2], Number(process.argv[3])];

const client = new Centrifuge(url, { websocket: WebSocket, maxServerPingDelay, minReconnectDelay: 100, maxReconnectDelay: 200 });
client.on('connecting', (ctx) => print({ event: 'connecting', code: ctx.code, reason: ctx.reason }));
client.on('connected', () => print({ event: 'connected' }));
client.on('disconnected', (ctx) => print({ event: 'disconnected', code: ctx.code, reason: ctx.reason }));
client.on('error', (ctx) => print({ event: 'client-error', message: JSON.stringify(ctx.error) }));

const sub = client.newSubscription('news');
sub.on('subscribing', (ctx) => print({ event: 'subscribing', code: ctx.code, reason: ctx.reason }));
sub.on('subscribed', (ctx) => print({ event: 'subscribed', recovered: ctx.recovered, wasRecovering: ctx.wasRecovering }));
sub.on('unsubscribed', (ctx) => print({ event: 'unsubscribed', code: ctx.code, reason: ctx.reason }));
sub.on('error', (ctx) => print({ event: 'sub-error', message: JSON.stringify(ctx.error) }));
sub.on('publication', (ctx) => print({ event: 'pub', offset: ctx.offset, n: ctx.data.n }));
sub.subscribe();
client.connect();

createInterface({ input: process.stdin }).on('close', () => process.exit(0));
