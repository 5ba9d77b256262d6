"""A WebSocket client built on the Python `websockets` library, for tether's
interop tests: a naive app that connects once and reports everything it sees.
It obeys commands that the Go test writes to stdin, one JSON object a line:

  {"cmd":"send","text":"..."}              send a text message
  {"cmd":"send_binary","size":1048576}     send that many random bytes as binary
  {"cmd":"send_fragments","parts":["a","b"]}  send one text message in that many frames
  {"cmd":"ping"}                           send a ping; its pong is reported
  {"cmd":"close","code":1000,"reason":""}  start the closing handshake

It reports on stdout, one JSON object a line: open (with the negotiated
subprotocol), message, sent, pong, close (code and reason), error. It exits when
stdin ends, so it cannot outlive the test that started it.

Usage: python3 py_client.py --url ws://... [--protocols a,b] [--origin http://...]
"""

import argparse
import asyncio
import hashlib
import json
import os
import sys

import websockets


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def describe(message):
    """Reports a message without printing a megabyte."""
    if isinstance(message, str):
        return {"type": "text", "data": message}
    return {"type": "binary", "size": len(message), "sha256": hashlib.sha256(message).hexdigest()}


async def read_messages(ws):
    try:
        async for message in ws:
            emit(event="message", **describe(message))
    except websockets.ConnectionClosed:
        pass
    emit(event="close", code=ws.close_code, reason=ws.close_reason)


async def ping(ws, payload, timeout):
    try:
        waiter = await ws.ping(payload)
        await asyncio.wait_for(waiter, timeout)
        emit(event="pong", data=payload.decode())
    except (asyncio.TimeoutError, websockets.ConnectionClosed) as err:
        emit(event="error", message="ping: " + repr(err))


async def command(ws, c, tasks):
    if c["cmd"] == "send":
        await ws.send(c["text"])
    elif c["cmd"] == "send_binary":
        data = os.urandom(c["size"])
        emit(event="sent", **describe(data))
        await ws.send(data)
    elif c["cmd"] == "send_fragments":
        # An iterable is sent as one fragmented message, a frame per item.
        await ws.send(iter(c["parts"]))
    elif c["cmd"] == "ping":
        tasks.add(asyncio.create_task(ping(ws, b"tether?", 10)))
    elif c["cmd"] == "close":
        tasks.add(asyncio.create_task(ws.close(code=c["code"], reason=c["reason"])))
    else:
        emit(event="error", message="unknown command " + json.dumps(c))


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--protocols", default="")
    parser.add_argument("--origin", default="")
    args = parser.parse_args()
    protocols = [p for p in args.protocols.split(",") if p]
    try:
        ws = await websockets.connect(args.url, subprotocols=protocols or None,
                                      origin=args.origin or None, max_size=None)
    except Exception as err:  # reported to the test, which decides
        emit(event="error", message="connect: " + repr(err))
        return
    emit(event="open", protocol=ws.subprotocol or "", version=websockets.__version__)
    tasks = {asyncio.create_task(read_messages(ws))}
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return
        await command(ws, json.loads(line), tasks)


if __name__ == "__main__":
    asyncio.run(main())
