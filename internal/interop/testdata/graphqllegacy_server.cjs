// A real subscriptions-transport-ws server (npm subscriptions-transport-ws
// 0.11, its SubscriptionServer on its own ws, with graphql 16) for the
// graphql-ws-legacy preset's tests. It listens on 127.0.0.1 (argv[2]: the
// port, 0 for a free one), sends ka every argv[3] ms, and prints
// {"event":"listening","port":N}, one {"event":"exec","op":...} line each
// time an operation starts executing, so the test counts what ran,
// {"event":"init"} for each connection_init and {"event":"client-stop"} for
// each stop a client sends. Schema: hello(delay) query, bump(delay)
// mutation, countdown(from) and ticks subscriptions.
// Command on stdin: {"cmd":"shutdown"} closes every client with 1001 and
// exits. It exits when stdin closes.
const { createInterface } = require('node:readline');
const { SubscriptionServer } = require('subscriptions-transport-ws');
const { execute, subscribe, GraphQLSchema, GraphQLObjectType, GraphQLString, GraphQLInt } = require('graphql');

const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let bumps = 0;

const schema = new GraphQLSchema({
  query: new GraphQLObjectType({
    name: 'Query',
    fields: {
      hello: {
        type: GraphQLString,
        args: { delay: { type: GraphQLInt } },
        resolve: async (_, { delay }) => {
          print({ event: 'exec', op: delay ? 'hello-slow' : 'hello' });
          if (delay) await sleep(delay);
          return 'world';
        },
      },
    },
  }),
  mutation: new GraphQLObjectType({
    name: 'Mutation',
    fields: {
      bump: {
        type: GraphQLInt,
        args: { delay: { type: GraphQLInt } },
        resolve: async (_, { delay }) => {
          print({ event: 'exec', op: delay ? 'bump-slow' : 'bump' });
          if (delay) await sleep(delay);
          return ++bumps;
        },
      },
    },
  }),
  subscription: new GraphQLObjectType({
    name: 'Subscription',
    fields: {
      countdown: {
        type: GraphQLInt,
        args: { from: { type: GraphQLInt } },
        subscribe: async function* (_, { from }) {
          print({ event: 'exec', op: 'countdown' });
          for (let i = from; i >= 0; i--) {
            yield { countdown: i };
            await sleep(20);
          }
        },
      },
      ticks: {
        type: GraphQLInt,
        subscribe: async function* () {
          print({ event: 'exec', op: 'ticks' });
          for (let i = 0; ; i++) {
            yield { ticks: i };
            await sleep(50);
          }
        },
      },
    },
  }),
});

const server = SubscriptionServer.create(
  { schema, execute, subscribe, keepAlive: Number(process.argv[3]), onConnect: () => { print({ event: 'init' }); return true; } },
  { host: '127.0.0.1', port: Number(process.argv[2] || 0), path: '/graphql' },
);
const wss = server.server;
wss.on('connection', (ws) => ws.on('message', (data) => {
  let m;
  try { m = JSON.parse(String(data)); } catch { return; }
  if (m && m.type === 'stop') print({ event: 'client-stop', id: m.id });
}));
wss.on('listening', () => print({ event: 'listening', port: wss.address().port }));
wss.on('error', (err) => { print({ event: 'server-error', message: String(err) }); process.exit(1); });

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = JSON.parse(line);
  if (cmd.cmd === 'shutdown') {
    for (const c of wss.clients) c.close(1001, 'going away');
    wss.close(() => process.exit(0));
  }
});
rl.on('close', () => process.exit(0));
