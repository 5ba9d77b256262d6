"""A WebSocket server built on the Python `websockets` library, for tether's
interop tests. It echoes every message with its type (str stays text, bytes stay
binary), accepts the subprotocol "v1.feed" when a client offers it, and obeys
commands that the Go test writes to stdin, one JSON object a line:

  {"cmd":"feed","from":1,"every_ms":10}       push {"seq":n} text messages to every client
  {"cmd":"close","code":1008,"reason":"bad"}  close every client with that code
  {"cmd":"ping"}                              ping every client; each pong is reported
  {"cmd":"send_fragments","parts":["a","b"]}  send every client one text message in that many frames

It reports on stdout, one JSON object a line: listening, connection (with the
negotiated extensions: websockets accepts permessage-deflate by default, with
12-bit windows both ways), message, pong, close. It exits when stdin ends, so it cannot outlive the test that started it.

Usage: python3 py_server.py [--port N]   (N = 0 or absent: an ephemeral port)
"""

import argparse
import asyncio
import hashlib
import json
import sys

import websockets


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


async def ping(ws, payload, timeout):
    try:
        waiter = await ws.ping(payload)
        await asyncio.wait_for(waiter, timeout)
        emit(event="pong", data=payload.decode())
    except (asyncio.TimeoutError, websockets.ConnectionClosed) as err:
        emit(event="error", message="ping: " + repr(err))


def describe(message):
    """Reports a message without printing a megabyte."""
    if isinstance(message, str):
        return {"type": "text", "data": message}
    return {"type": "binary", "size": len(message), "sha256": hashlib.sha256(message).hexdigest()}


class Server:
    def __init__(self):
        self.clients = set()
        self.feed = None

    async def handle(self, ws):
        self.clients.add(ws)
        emit(event="connection", protocol=ws.subprotocol or "",
             origin=ws.request_headers.get("Origin", ""), path=ws.path,
             extensions=",".join(e.name for e in ws.extensions),
             offered=ws.request_headers.get("Sec-WebSocket-Extensions", ""),
             accepted=ws.response_headers.get("Sec-WebSocket-Extensions", ""))
        try:
            async for message in ws:
                emit(event="message", **describe(message))
                await ws.send(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.clients.discard(ws)
            emit(event="close", code=ws.close_code, reason=ws.close_reason)

    async def push(self, seq, every):
        while True:
            for ws in list(self.clients):
                try:
                    await ws.send(json.dumps({"seq": seq}))
                except websockets.ConnectionClosed:
                    pass
            seq += 1
            await asyncio.sleep(every)

    def stop_feed(self):
        if self.feed is not None:
            self.feed.cancel()
            self.feed = None

    def command(self, c, tasks):
        if c["cmd"] == "feed":
            self.stop_feed()
            self.feed = asyncio.create_task(self.push(c["from"], c["every_ms"] / 1000))
        elif c["cmd"] == "close":
            self.stop_feed()
            for ws in list(self.clients):
                # A task each: close waits for the client's close frame, and
                # stdin must keep being read meanwhile.
                tasks.add(asyncio.create_task(ws.close(code=c["code"], reason=c["reason"])))
        elif c["cmd"] == "send_fragments":
            for ws in list(self.clients):
                # An iterable is sent as one fragmented message, a frame per item.
                tasks.add(asyncio.create_task(ws.send(iter(c["parts"]))))
        elif c["cmd"] == "ping":
            for ws in list(self.clients):
                tasks.add(asyncio.create_task(ping(ws, b"upstream?", 10)))
        else:
            emit(event="error", message="unknown command " + json.dumps(c))


async def read_commands(server):
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks = set()
    while True:
        line = await reader.readline()
        if not line:
            return
        server.command(json.loads(line), tasks)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = Server()
    ws_server = await websockets.serve(server.handle, "127.0.0.1", args.port,
                                       subprotocols=["v1.feed"], max_size=None)
    emit(event="listening", port=ws_server.sockets[0].getsockname()[1],
         version=websockets.__version__)
    await read_commands(server)


if __name__ == "__main__":
    asyncio.run(main())
