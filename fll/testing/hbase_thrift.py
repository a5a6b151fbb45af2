"""An HBase Thrift 1 test server: HBase's Thrift 1 IDL served over TCP on
127.0.0.1 by thriftpy2, backed by an in-memory sorted map with HBase's
semantics. It is a test double, not HBase: one process, no regions, no
persistence, no security.

What it reproduces, from HBase's Thrift 1 handler (``ThriftHBaseServiceHandler``)
and HBase's defaults, because fll's HBase backend depends on each of them:

- rows in byte order, cells ``family:qualifier`` with millisecond timestamps and
  versions up to the family's ``max_versions``; a put with the same timestamp
  replaces that version;
- delete markers: a delete without an explicit timestamp is stamped "now" and
  hides every version at or below it, so a put of the same cell in the same
  millisecond stays hidden until a major compaction;
- ``mutateRows`` checks every row key before writing any (HBase builds its
  Put/Delete objects first): an empty key or one over 32,767 bytes fails the
  whole call with "Internal error processing mutateRows", as HBase's does;
  ``mutateRow`` and ``checkAndPut`` refuse it with ``IllegalArgument``;
- scanners: start/stop rows, prefix, columns, timestamp, caching, batch
  (partial rows of at most ``batchSize`` cells), a few filter strings, and
  reverse scans as HBase >= 0.98 does them (start row inclusive upper bound,
  stop row exclusive lower bound);
- table and column-family admin: create (``AlreadyExists``), disable, enable,
  delete (only when disabled), descriptors, one region;
- ``IOError`` messages carrying HBase's exception class names
  (``TableNotFoundException``, ``NoSuchColumnFamilyException``, …); batched
  mutations on a missing table fail with HBase 2's
  ``RetriesExhaustedWithDetailsException … Table 'x' was not found`` text;
- a connection's requests answered one at a time in the order they came,
  however many a client writes before reading (pipelining): a thread per
  connection reads a request, answers it, then reads the next, as HBase's
  ``TBoundedThreadPoolServer`` does (its non-blocking servers read a
  connection's next frame only after answering the last, too);
- framed transport refuses a frame over ``max_frame`` bytes (HBase's
  ``hbase.regionserver.thrift.framed.max_frame_size_in_mb``, default 2 MiB) by
  closing the connection.

For fault tests the server can be stopped and started again on the same port
with its data kept (the Thrift gateway restarting in front of the same
cluster), delay every call, and count calls by method.

The tables are modelled in `fll.testing.hbase_model`, the ``Hbase`` service
in `fll.testing.hbase_handler`; this module serves it.

Run on its own: ``python -m fll.testing.hbase_thrift --port 0 [--framed] [--compact]``
prints ``port N`` and serves until interrupted. This module must never listen
on anything but the loopback interface, and must never be used by fll itself.
"""
from __future__ import annotations

import argparse
import collections
import socket
import struct
import threading
import time
from io import BytesIO
from typing import Any

from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.thrift import TApplicationException, TProcessor
from thriftpy2.transport import TTransportException
from thriftpy2.transport.buffered import TBufferedTransport
from thriftpy2.transport.framed import TFramedTransport
from thriftpy2.transport.socket import TSocket

from .hbase_handler import HBaseHandler
from .hbase_model import DEFAULT_MAX_FRAME, hb


class _LimitedFramedTransport(TFramedTransport):
    """Framed transport that, like HBase's, closes the connection on a frame
    larger than its maximum instead of reading it."""

    def __init__(self, trans, max_frame: int):
        super().__init__(trans)
        self.max_frame = max_frame

    def read_frame(self):
        head = self._trans.read(4)
        while len(head) < 4:
            more = self._trans.read(4 - len(head))
            if not more:
                raise TTransportException(TTransportException.END_OF_FILE, "connection closed")
            head += more
        size, = struct.unpack("!i", head)
        if size < 0 or size > self.max_frame:
            raise TTransportException(TTransportException.UNKNOWN,
                                      f"Read a frame size of {size}, which is bigger than the "
                                      f"maximum allowable buffer size")
        buf = BytesIO()
        while buf.tell() < size:
            chunk = self._trans.read(size - buf.tell())
            if not chunk:
                raise TTransportException(TTransportException.END_OF_FILE, "connection closed")
            buf.write(chunk)
        self._rbuf = BytesIO(buf.getvalue())


class HBaseThriftServer:
    """The handler served on 127.0.0.1, a thread per connection."""

    def __init__(self, port: int = 0, *, transport: str = "buffered", protocol: str = "binary",
                 max_frame: int = DEFAULT_MAX_FRAME, handler: HBaseHandler | None = None):
        if transport not in ("buffered", "framed") or protocol not in ("binary", "compact"):
            raise ValueError(f"unknown transport/protocol {transport}/{protocol}")
        self.port = port
        self.transport, self.protocol, self.max_frame = transport, protocol, max_frame
        self.handler = handler or HBaseHandler(self)
        self.delay = 0.0  # seconds added to every call (a slow server)
        self.calls: collections.Counter[str] = collections.Counter()
        self._processor = TProcessor(hb.Hbase, self.handler)
        self._listener: socket.socket | None = None
        self._clients: set[socket.socket] = set()
        self._mu = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, table: str, **params: Any) -> str:
        query = {"transport": self.transport, "protocol": self.protocol, **params}
        return f"hbase://{self.address}/{table}?" + "&".join(f"{k}={v}" for k, v in query.items())

    def total_calls(self) -> int:
        with self._mu:
            return sum(self.calls.values())

    def start(self) -> "HBaseThriftServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._listener = sock
        self._thread = threading.Thread(target=self._accept, args=(sock,), daemon=True,
                                        name=f"hbase-thrift-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every open connection at once (a killed gateway);
        the data stays, and `start` serves it again on the same port."""
        sock, self._listener = self._listener, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        with self._mu:
            clients, self._clients = list(self._clients), set()
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> "HBaseThriftServer":
        return self.start() if self._listener is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with self._mu:
                if self._listener is not sock:
                    conn.close()
                    return
                self._clients.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        # libthrift's TSocket turns Nagle's algorithm off on every accepted
        # socket (setTcpNoDelay(true)), as HBase's Thrift server serves them:
        # answers to pipelined requests leave at once, not one per ACK
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        tsock = TSocket()
        tsock.set_handle(conn)
        trans: Any = (_LimitedFramedTransport(tsock, self.max_frame)
                      if self.transport == "framed" else TBufferedTransport(tsock))
        proto = (TCompactProtocol(trans) if self.protocol == "compact"
                 else TBinaryProtocol(trans, decode_response=False))
        try:
            while True:
                self._one(proto)
        except Exception:  # a closed, broken or mismatched connection: drop it
            pass
        finally:
            with self._mu:
                self._clients.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _one(self, proto: Any) -> None:
        api, seqid, result, call = self._processor.process_in(proto)
        with self._mu:
            self.calls[api] += 1
        if self.delay:
            time.sleep(self.delay)
        if isinstance(result, TApplicationException):
            self._processor.send_exception(proto, api, result, seqid)
            return
        assert call is not None
        try:
            result.success = call()
        except TApplicationException as e:
            self._processor.send_exception(proto, api, e, seqid)
            return
        except Exception as e:
            if not self._processor.handle_exception(e, result):
                # what HBase's Java server answers for an undeclared exception
                self._processor.send_exception(proto, api, TApplicationException(
                    TApplicationException.INTERNAL_ERROR, f"Internal error processing {api}"),
                    seqid)
                return
        self._processor.send_result(proto, api, result, seqid)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fll.testing.hbase_thrift",
                                 description="An HBase Thrift 1 test server (a test double, "
                                             "not HBase) on 127.0.0.1.")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    ap.add_argument("--framed", action="store_true", help="framed transport (else buffered)")
    ap.add_argument("--compact", action="store_true", help="compact protocol (else binary)")
    ap.add_argument("--max-frame-mb", type=float, default=2.0,
                    help="largest framed request accepted, MiB (HBase default 2)")
    args = ap.parse_args(argv)
    server = HBaseThriftServer(args.port, transport="framed" if args.framed else "buffered",
                               protocol="compact" if args.compact else "binary",
                               max_frame=int(args.max_frame_mb * 1024 * 1024)).start()
    print(f"port {server.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
