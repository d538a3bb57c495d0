#!/usr/bin/env python3
"""idle-conns.py PORT N READY SECONDS [PATH]: opens N keep-alive connections
to 127.0.0.1:PORT, each sending one GET of PATH (/strategies) and reading its
200 answer whole, then writes N to the file READY and holds them all open,
idle, for SECONDS. Exits non-zero when a connection is not answered 200.
Used by loadtest/http-bench.sh and loadtest/idle-bound.sh."""
import socket
import sys
import time

port, n, ready, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
path = sys.argv[5] if len(sys.argv) > 5 else "/strategies"
req = b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"
socks = []


def more(s, i):
    """The next bytes on connection i; exits when the server closed it."""
    b = s.recv(65536)
    if not b:
        sys.exit("connection %d: closed by the server before its answer" % i)
    return b


for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(req)
    got = b""
    while b"\r\n\r\n" not in got:
        got += more(s, i)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int([l.split(b":")[1] for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length")][0])
    while len(body) < length:
        body += more(s, i)
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit("connection %d: %r" % (i, head[:40]))
    socks.append(s)
with open(ready, "w") as f:
    f.write("%d\n" % len(socks))
time.sleep(hold)
