"""JSON-RPC 2.0, one JSON message per line, on any stdin and stdout: the wire of `acp-serve`.

`LineTransport`, a message transport for the ACP SDK's `Connection`, answers itself what it
cannot hand on (-32700, -32600), assembles batch answers, and ends only when every request
is answered. Each request handed on carries a private `_Slot` as its id, so answers are
matched by identity, never by the client's id. Reads and writes block on daemon threads.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import math
import os
import select
import threading
from collections.abc import Callable
from typing import Any, Final

import attrs

from kernel.errors import KernelError
from kernel.wire.jsontext import encode_json_bytes

__all__ = (
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "INTERNAL_ERROR",
    "MAX_LINE_BYTES",
    "MAX_DEPTH",
    "MAX_BATCH",
    "OVERLONG",
    "LineFramer",
    "NotParsed",
    "parse_message",
    "refusal",
    "error_answer",
    "LineTransport",
)

PARSE_ERROR: Final = -32700
"""JSON-RPC's "parse error": a line that is not UTF-8 JSON, or is nested past `MAX_DEPTH`."""
INVALID_REQUEST: Final = -32600
"""JSON-RPC's "invalid request": a message that is not a request, or a line past the cap."""
INTERNAL_ERROR: Final = -32603
"""JSON-RPC's "internal error": here, an answer that could not be encoded as JSON."""

MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The default cap on one line (its newline not counted): 4 MiB."""
MAX_DEPTH: Final = 128
"""How deeply arrays and objects may nest in one message."""
MAX_BATCH: Final = 1000
"""The most messages one batch may hold: its answer is written as one line."""

_READ_CHUNK: Final = 1 << 16
_WRITE_CHUNK: Final = 1 << 20
_INBOX_BATCHES: Final = 4
_OUTBOX_MESSAGES: Final = 256


class _Overlong:
    """The marker the framer emits in place of a line longer than its cap."""

    def __repr__(self) -> str:
        return "OVERLONG"


OVERLONG: Final = _Overlong()

Item = bytes | _Overlong


class LineFramer:
    """Splits a byte stream into lines, never holding more than `limit` bytes of one line.

    A line longer than `limit` is emitted as `OVERLONG` the moment it passes the cap,
    and its bytes are dropped up to the next newline.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._discarding = False

    def feed(self, chunk: bytes) -> list[Item]:
        """The lines (without their newline) and `OVERLONG` markers that `chunk` completes."""
        items: list[Item] = []
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline == -1 else newline
            if not self._discarding:
                if self._size + end - start > self.limit:
                    items.append(OVERLONG)
                    self._parts.clear()
                    self._size = 0
                    self._discarding = True
                else:
                    self._parts.append(chunk[start:end])
                    self._size += end - start
            if newline == -1:
                break
            if not self._discarding:
                items.append(b"".join(self._parts))
            self._parts.clear()
            self._size = 0
            self._discarding = False
            start = newline + 1
        return items

    def end(self) -> list[Item]:
        """What is left at the end of the stream: a last line without its newline, if any."""
        rest: list[Item] = [] if self._discarding or not self._parts else [b"".join(self._parts)]
        self._parts.clear()
        self._size = 0
        self._discarding = False
        return rest


class NotParsed(ValueError):
    """A line that is not one JSON text this server parses; the message says why."""


def _refuse_constant(name: str) -> Any:
    raise NotParsed(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotParsed(f"the number {text[:40]} is out of range")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def parse_message(line: bytes) -> Any:
    """The JSON value of one line; raises `NotParsed` for bad UTF-8, bad JSON or deep nesting.

    NaN, Infinity and numbers out of a double's range are refused, so an answer that
    echoes a value is always JSON again.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotParsed(f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise NotParsed(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise NotParsed(f"not JSON: {exc.msg} (character {exc.pos})") from None
    except NotParsed:
        raise
    except ValueError as exc:  # an integer past the interpreter's digit limit
        raise NotParsed(f"not JSON this server reads: {exc}") from None
    if isinstance(value, dict | list) and _deeper_than(value, MAX_DEPTH):
        raise NotParsed(f"nested deeper than {MAX_DEPTH} levels")
    return value


def error_answer(answer_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": answer_id, "error": error}


def _is_id(value: Any) -> bool:
    return (
        value is None
        or type(value) is str
        or type(value) is int
        or (type(value) is float and math.isfinite(value))
    )


_KINDS: Final = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def refusal(message: Any) -> dict[str, Any] | None:
    """The -32600 answer to a message that is neither a request, a notification nor a response.

    None for a valid one. The answer carries the message's id when it can be read,
    else null (JSON-RPC 2.0 §5).
    """
    if not isinstance(message, dict):
        kind = _KINDS.get(type(message), type(message).__name__)
        return _invalid(None, f"a message must be a JSON object, not {kind}")
    given = message.get("id")
    answer_id = given if _is_id(given) else None
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return None
        return _invalid(answer_id, "a request needs a method")
    if message.get("jsonrpc") != "2.0":
        return _invalid(answer_id, 'a request needs "jsonrpc": "2.0"')
    if not _is_id(given):
        return _invalid(None, "an id must be a string, a number or null")
    if type(message["method"]) is not str:
        return _invalid(answer_id, "a method must be a string")
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return _invalid(answer_id, "params must be an object or an array")
    return None


def _invalid(answer_id: Any, reason: str) -> dict[str, Any]:
    return error_answer(answer_id, INVALID_REQUEST, f"Invalid request: {reason}")


@attrs.define(eq=False)
class _Batch:
    """The answers of one batch so far, and how many of its requests are still running."""

    answers: list[dict[str, Any]] = attrs.Factory(list)
    waiting: int = 0


@attrs.define(eq=False)
class _Slot:
    """The id the connection sees for a request: the client's id, and the batch it came in."""

    id: Any
    batch: _Batch | None


def _wait_readable(fd: int) -> None:
    select.select([fd], [], [])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # an inherited non-blocking descriptor
            select.select([], [fd], [])
            continue
        view = view[written:]


def _read_lines(fd: int, framer: LineFramer, deliver: Callable[[list[Item | None]], bool]) -> None:
    """The reader thread: frames `fd` into lines and delivers them; None ends the stream."""
    while True:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            _wait_readable(fd)
            continue
        except OSError:  # a closed or unreadable stdin ends the session like end of input
            chunk = b""
        if not chunk:
            deliver([*framer.end(), None])
            return
        items: list[Item | None] = list(framer.feed(chunk))
        if items and not deliver(items):
            return


class _Writer:
    """A daemon thread that writes to `fd`, one job at a time, in order."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._jobs: collections.deque[tuple[bytes, asyncio.Future[OSError | None]] | None] = (
            collections.deque()
        )
        self._ready = threading.Semaphore(0)
        threading.Thread(target=self._run, name="acp-serve stdout", daemon=True).start()

    async def write(self, data: bytes) -> OSError | None:
        """Write `data` whole; the error that stopped it, if any."""
        done: asyncio.Future[OSError | None] = self._loop.create_future()
        self._jobs.append((data, done))
        self._ready.release()
        return await done

    def stop(self) -> None:
        self._jobs.append(None)
        self._ready.release()

    def _run(self) -> None:
        while True:
            self._ready.acquire()
            job = self._jobs.popleft()
            if job is None:
                return
            data, done = job
            error: OSError | None = None
            try:
                _write_all(self._fd, data)
            except OSError as exc:
                error = exc
            try:
                self._loop.call_soon_threadsafe(_settle, done, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                return


def _settle(done: asyncio.Future[OSError | None], error: OSError | None) -> None:
    if not done.done():
        done.set_result(error)


class LineTransport:
    """The ACP SDK `Transport` of `acp-serve` over two file descriptors (see the module doc).

    `start()` must be called inside the running loop before the first `receive()`.
    """

    def __init__(
        self, input_fd: int = 0, output_fd: int = 1, *, max_line_bytes: int = MAX_LINE_BYTES
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self.input_fd = input_fd
        self.output_fd = output_fd
        self.max_line_bytes = max_line_bytes
        self._inbox: asyncio.Queue[list[Item | None]] = asyncio.Queue(_INBOX_BATCHES)
        self._pending: collections.deque[Item | None] = collections.deque()
        self._ready: collections.deque[dict[str, Any]] = collections.deque()
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue(_OUTBOX_MESSAGES)
        self._outstanding = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._hung_up = False
        self._pump: asyncio.Task[None] | None = None
        self._writer: _Writer | None = None

    def start(self) -> None:
        """Start the reader and writer threads and the output pump."""
        loop = asyncio.get_running_loop()
        self._writer = _Writer(self.output_fd, loop)
        self._pump = loop.create_task(self._run_pump(self._writer), name="acp-serve output")

        def deliver(items: list[Item | None]) -> bool:
            try:
                asyncio.run_coroutine_threadsafe(self._inbox.put(items), loop).result()
            except (RuntimeError, concurrent.futures.CancelledError):
                return False  # the server has stopped
            return True

        framer = LineFramer(self.max_line_bytes)
        threading.Thread(
            target=_read_lines,
            args=(self.input_fd, framer, deliver),
            name="acp-serve stdin",
            daemon=True,
        ).start()

    # -- the Transport protocol -----------------------------------------------------------------

    async def receive(self) -> dict[str, Any] | None:
        """The next request or notification to handle; None once the session is over."""
        while not self._ready:
            item = await self._next_item()
            if item is None:
                await self._idle.wait()
                return None
            await self._take(item)
        return self._ready.popleft()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message; an answer goes out under the client's id (in its batch)."""
        slot = message.get("id")
        if not isinstance(slot, _Slot):
            await self._write(message)
            return
        answer = {**message, "id": slot.id}
        batch = slot.batch
        if batch is None:
            await self._write(answer)
        else:
            batch.answers.append(answer)
            batch.waiting -= 1
            if batch.waiting == 0:
                await self._write(batch.answers)
        self._outstanding -= 1
        if self._outstanding == 0:
            self._idle.set()

    async def close(self) -> None:
        """Flush what is queued and stop the writer thread."""
        if self._pump is None:
            return
        await self._outbox.put(None)
        await self._pump
        self._pump = None

    # -- input ----------------------------------------------------------------------------------

    async def _next_item(self) -> Item | None:
        if self._hung_up:
            return None
        if not self._pending:
            self._pending.extend(await self._inbox.get())
        return self._pending.popleft()

    async def _take(self, item: Item) -> None:
        """Answer a line that cannot be handed on, or queue what it holds for the connection."""
        if isinstance(item, _Overlong):
            reason = f"a line longer than {self.max_line_bytes} bytes (discarded)"
            limit = {"maxLineBytes": self.max_line_bytes}
            await self._write(
                error_answer(None, INVALID_REQUEST, f"Invalid request: {reason}", limit)
            )
            return
        line = item.strip()
        if not line:
            return
        try:
            value = parse_message(line)
        except NotParsed as exc:
            await self._write(error_answer(None, PARSE_ERROR, f"Parse error: {exc}"))
            return
        if isinstance(value, list):
            await self._take_batch(value)
            return
        refused = refusal(value)
        if refused is not None:
            await self._write(refused)
        elif "method" in value:
            self._ready.append(self._slotted(value, None))
        # else: a response; this server sends no requests, so nothing awaits it

    async def _take_batch(self, messages: list[Any]) -> None:
        """JSON-RPC 2.0 §6: one array of answers, written when its last request is answered."""
        if not messages:
            await self._write(_invalid(None, "an empty batch"))
            return
        if len(messages) > MAX_BATCH:
            await self._write(_invalid(None, f"a batch of more than {MAX_BATCH} messages"))
            return
        batch = _Batch()
        for message in messages:
            refused = refusal(message)
            if refused is not None:
                batch.answers.append(refused)
            elif "method" in message:
                if "id" in message:
                    batch.waiting += 1
                self._ready.append(self._slotted(message, batch))
        if batch.waiting == 0 and batch.answers:
            await self._write(batch.answers)

    def _slotted(self, message: dict[str, Any], batch: _Batch | None) -> dict[str, Any]:
        if "id" not in message:
            return message
        self._outstanding += 1
        self._idle.clear()
        return {**message, "id": _Slot(message["id"], batch)}

    # -- output ---------------------------------------------------------------------------------

    async def _write(self, payload: dict[str, Any] | list[dict[str, Any]]) -> None:
        if self._hung_up:
            return
        if isinstance(payload, list):
            data = b"[" + b",".join(_encoded(answer) for answer in payload) + b"]\n"
        else:
            data = _encoded(payload) + b"\n"
        await self._outbox.put(data)

    async def _run_pump(self, writer: _Writer) -> None:
        """Gather queued lines into writes of up to 1 MiB, in order, until `close()`."""
        try:
            closing = False
            while not closing:
                first = await self._outbox.get()
                if first is None:
                    break
                chunks = [first]
                size = len(first)
                while size < _WRITE_CHUNK and not self._outbox.empty():
                    more = self._outbox.get_nowait()
                    if more is None:
                        closing = True
                        break
                    chunks.append(more)
                    size += len(more)
                if not self._hung_up and await writer.write(b"".join(chunks)) is not None:
                    self._hang_up()
        finally:
            writer.stop()

    def _hang_up(self) -> None:
        """The client stopped reading: end the session as at the end of input."""
        self._hung_up = True
        if not self._inbox.full():
            self._inbox.put_nowait([None])


def _encoded(message: dict[str, Any]) -> bytes:
    """One message as JSON; an answer that cannot be encoded becomes an internal error.

    ASCII from the standard encoder; a message nested past its recursion limit (a
    tool call's deep arguments) goes to the kernel's iterative writer, as UTF-8.
    """
    try:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (TypeError, ValueError, RecursionError) as failure:
        if isinstance(failure, RecursionError):
            with contextlib.suppress(KernelError):
                return encode_json_bytes(message)
        if "id" not in message:
            raise
        fallback = error_answer(
            message["id"], INTERNAL_ERROR, "Internal error: the answer could not be encoded as JSON"
        )
        return json.dumps(fallback, separators=(",", ":")).encode("ascii")
