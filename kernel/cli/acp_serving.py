"""`session-kernel acp-serve STORE`: a read-only ACP agent over stdio that replays stored sessions.

Built on the official SDK (`acp`, the `acp` extra) and `kernel.cli.acp_stdio`, the wire that
answers malformed input itself. The agent answers `initialize`, `session/list` and
`session/load`, and refuses with a server error every request that would run a model or
change a session. Each request reads the store afresh, read-only, on a worker thread, through
the store (which follows no symbolic link below its root); errors name sessions and
store-relative paths, never the store's own path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final

import attrs
from acp import PROTOCOL_VERSION, Agent, Client, RequestError
from acp.agent.router import build_agent_router
from acp.connection import Connection, MethodHandler
from acp.meta import CLIENT_METHODS
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionNotification,
)
from acp.utils import serialize_params
from pydantic import ValidationError

from kernel.cli.acp_stdio import MAX_LINE_BYTES, LineTransport
from kernel.cli.sources import SQLITE, describe_os_error, holds_zstd, kind_of, open_log
from kernel.cli.sqlite import sqlite_listing
from kernel.errors import KernelError
from kernel.projections import acp_updates
from kernel.store.errors import SessionNotFound
from kernel.store.jsonl import JsonlStore
from kernel.store.results import SessionListing
from kernel.values.events import Event, SessionHeader
from kernel.values.json import summary

__all__ = (
    "READ_ONLY",
    "NOT_FOUND",
    "CANNOT_READ",
    "Listing",
    "StoreReader",
    "ReplayAgent",
    "serve",
    "run_acp_serve",
)

READ_ONLY: Final = -32050
"""A server error (JSON-RPC's -32000..-32099): the request would run a prompt or change a
session, and this agent only replays."""
NOT_FOUND: Final = -32002
"""ACP's "resource not found": no such store or session."""
CANNOT_READ: Final = -32603
"""A store or session that exists but cannot be read or admitted (damaged, unsupported)."""

_REFUSAL: Final = (
    "session-kernel acp-serve is read-only: it replays stored sessions and does not run "
    "prompts, create, fork, resume or change sessions"
)
_CONCURRENT_READS: Final = 4
"""Store reads (and replays) at a time; the rest wait, so a burst cannot hold N sessions."""
_YIELD_EVERY: Final = 64
"""Replayed updates between two turns of the event loop, so other requests are answered."""
_SESSION_UPDATE: Final = CLIENT_METHODS["session_update"]


def _now() -> int:
    return int(time.time() * 1000)


@attrs.frozen
class Listing:
    """The sessions of a store that could be read, and one entry per session that could not."""

    headers: tuple[SessionHeader, ...]
    skipped: tuple[dict[str, str], ...]


class StoreReader:
    """A store named on the command line: a JSONL store directory, a SQLite database, or
    one JSONL log file. Every call reads afresh and writes nothing; `max_decoded_bytes`
    caps a Zstandard log's plaintext (None: the default cap)."""

    def __init__(self, path: str, *, max_decoded_bytes: int | None = None) -> None:
        self.path = path
        self.max_decoded_bytes = max_decoded_bytes

    def store_relative(self, text: str) -> str:
        """`text` with the store's own path cut out: paths under it become relative."""
        name = Path(self.path).name or "the store"
        spellings = {os.path.abspath(self.path), os.path.realpath(self.path)}
        if os.sep in self.path.rstrip(os.sep):
            spellings.add(self.path.rstrip(os.sep))
        for spelling in sorted(spellings, key=len, reverse=True):
            edge = r"(?<![\w.~-])" + re.escape(spelling)
            text = re.sub(edge + re.escape(os.sep), "", text)
            text = re.sub(edge + r"(?![\w.~-])", lambda _: name, text)
        return text

    def skipped(self, location: str, exc: Exception) -> dict[str, str]:
        """The `session/list` entry of a session that could not be read."""
        if isinstance(exc, OSError):
            message = describe_os_error(exc)
        else:
            message = self.store_relative(str(exc))
        return {"location": location, "errorClass": type(exc).__name__, "message": message}

    def _skipped_all(self, listed: SessionListing) -> Listing:
        skipped = tuple(self.skipped(item.location, item.error) for item in listed.unreadable)
        return Listing(listed.headers, skipped)

    def _jsonl_store(self) -> JsonlStore:
        root = Path(self.path)
        return JsonlStore(root, zstd=holds_zstd(root), max_decoded_bytes=self.max_decoded_bytes)

    # -- every kind of store ----------------------------------------------------------------

    def listing(self) -> Listing:
        """The headers of every stored session that can be read; the others as skipped.

        Only headers are read: a JSONL session file's first line or frame, a
        database's `sessions` rows. A session whose events are damaged is listed,
        and loading it names the damage.
        """
        target = Path(self.path)
        if target.is_dir():
            return self._skipped_all(self._jsonl_store().list_readable())
        kind = kind_of(target) or "jsonl"
        if kind == SQLITE:
            return self._skipped_all(sqlite_listing(self.path))
        try:
            opened = open_log(
                self.path, kind, session=None, now=_now(), max_decoded_bytes=self.max_decoded_bytes
            )
        except KernelError as exc:
            return Listing((), (self.skipped(target.name, exc),))
        return Listing((opened.header,), ())

    def balanced(self, session_id: str) -> tuple[SessionHeader, tuple[Event, ...]]:
        """The header and balanced events (stored prefix + closers) of one session."""
        target = Path(self.path)
        if target.is_dir():
            stored = self._jsonl_store().inspect(session_id, now=_now())
            return stored.header, stored.events
        kind = kind_of(target) or "jsonl"
        cap = self.max_decoded_bytes
        if kind == SQLITE:
            opened = open_log(self.path, kind, session=session_id, now=_now())
        else:
            opened = open_log(self.path, kind, session=None, now=_now(), max_decoded_bytes=cap)
            if opened.session != session_id:
                raise SessionNotFound(f"no stored session {summary(session_id)}")
        return opened.header, (*opened.stored, *opened.closers)


@contextmanager
def _protocol_errors(what: str, store: StoreReader) -> Iterator[None]:
    """Turn a failed read into the protocol error the client gets, without the store's path."""
    try:
        yield
    except SessionNotFound as exc:
        message = f"{what}: {store.store_relative(str(exc))}"
        raise RequestError(NOT_FOUND, message, {"errorClass": "SessionNotFound"}) from None
    except FileNotFoundError as exc:
        missing = store.store_relative(str(exc.filename))
        raise RequestError(
            NOT_FOUND, f"{what}: no such store: {missing}", {"errorClass": "FileNotFound"}
        ) from None
    except KernelError as exc:
        name = type(exc).__name__
        message = f"{what}: {name}: {store.store_relative(str(exc))}"
        raise RequestError(CANNOT_READ, message, {"errorClass": name}) from None
    except OSError as exc:
        raise RequestError(
            CANNOT_READ, f"{what}: {describe_os_error(exc)}", {"errorClass": type(exc).__name__}
        ) from None
    except (ValidationError, ValueError, TypeError, LookupError) as exc:  # a bug: say so
        name = type(exc).__name__
        logging.getLogger(__name__).error("%s: internal error: %s: %s", what, name, exc)
        message = f"{what}: internal error: {name}: {store.store_relative(str(exc))}"
        raise RequestError(CANNOT_READ, message, {"errorClass": name}) from None


class ReplayAgent(Agent):
    """The ACP agent of `acp-serve`: lists and replays the sessions of one store."""

    def __init__(self, store: StoreReader, *, version: str = "unknown") -> None:
        self.store = store
        self.version = version
        self._connection: Connection | None = None
        self._reads = asyncio.Semaphore(_CONCURRENT_READS)

    def attach(self, connection: Connection) -> None:
        """The connection replayed updates are sent on."""
        self._connection = connection

    def on_connect(self, conn: Client) -> None:
        return None  # serve() attaches the raw connection: updates go out as validated

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        capabilities = AgentCapabilities(
            load_session=True,
            session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
        )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=capabilities,
            agent_info=Implementation(
                name="session-kernel", title="session-kernel replay", version=self.version
            ),
        )

    def _listing(self) -> Listing:
        with _protocol_errors("cannot list the store", self.store):
            return self.store.listing()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        async with self._reads:
            listing = await asyncio.to_thread(self._listing)
        sessions = [
            SessionInfo(session_id=h.id, cwd=h.cwd or "/")
            for h in listing.headers
            if cwd is None or h.cwd == cwd
        ]
        meta = {"skippedSessions": list(listing.skipped)} if listing.skipped else None
        return ListSessionsResponse(sessions=sessions, field_meta=meta)

    def _replay(self, session_id: str) -> list[dict[str, Any]]:
        """The `session/update` params that replay a session, checked against the ACP schema."""
        with _protocol_errors(f"cannot load session {summary(session_id)}", self.store):
            header, events = self.store.balanced(session_id)
            notes = acp_updates(events, session_id=header.id)
            return [_checked(n) for n in notes]

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        connection = self._connection
        assert connection is not None, "serve() attaches the connection first"
        async with self._reads:
            updates = await asyncio.to_thread(self._replay, session_id)
            for count, params in enumerate(updates, start=1):
                await connection.send_notification(_SESSION_UPDATE, params)
                if count % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        return LoadSessionResponse()

    async def new_session(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(READ_ONLY, _REFUSAL, {"method": "session/new"})

    async def prompt(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(READ_ONLY, _REFUSAL, {"method": "session/prompt"})

    async def fork_session(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(READ_ONLY, _REFUSAL, {"method": "session/fork"})

    async def resume_session(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(READ_ONLY, _REFUSAL, {"method": "session/resume"})

    async def set_session_mode(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(READ_ONLY, _REFUSAL, {"method": "session/set_mode"})

    async def set_config_option(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError(READ_ONLY, _REFUSAL, {"method": "session/set_config_option"})

    async def authenticate(self, *args: Any, **kwargs: Any) -> Any:
        return None  # nothing to authenticate: the agent reads local files only

    async def close_session(self, *args: Any, **kwargs: Any) -> Any:
        return None

    async def cancel(self, *args: Any, **kwargs: Any) -> None:
        return None  # nothing runs, so nothing to cancel

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _notifications_quiet(router: MethodHandler) -> MethodHandler:
    """The router, but a notification it refuses is dropped: it has no answer to say so in,
    and the SDK would log a traceback for it."""

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        if not is_notification:
            return await router(method, params, False)
        with suppress(RequestError, ValidationError):
            await router(method, params, True)
        return None

    return handle


async def serve(
    store: str,
    *,
    input_fd: int = 0,
    output_fd: int = 1,
    max_line_bytes: int = MAX_LINE_BYTES,
    version: str = "unknown",
    max_decoded_bytes: int | None = None,
) -> None:
    """Serve ACP on two file descriptors until the input ends (or the output is closed).

    `max_decoded_bytes` caps a Zstandard log's plaintext (None: the default cap).
    """
    transport = LineTransport(input_fd, output_fd, max_line_bytes=max_line_bytes)
    reader = StoreReader(store, max_decoded_bytes=max_decoded_bytes)
    agent = ReplayAgent(reader, version=version)
    # The unstable routes (fork, resume, close) are on so that they are refused as
    # read-only rather than with a warning on stderr.
    router = build_agent_router(agent, use_unstable_protocol=True)
    connection = Connection(_notifications_quiet(router), transport, listening=False)
    agent.attach(connection)
    transport.start()
    try:
        await connection.main_loop()
    finally:
        await connection.close()


class _OneLine(logging.Formatter):
    """What the SDK logs, as one line: the command never prints a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"session-kernel acp-serve: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f": {type(exc).__name__}: {exc}"
        return text


def _log_one_line_each() -> Callable[[], None]:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [handler]

    def restore() -> None:
        root.handlers = saved

    return restore


def run_acp_serve(
    store: str,
    *,
    version: str = "unknown",
    max_line_bytes: int = MAX_LINE_BYTES,
    max_decoded_bytes: int | None = None,
) -> int:
    """Serve ACP on stdin/stdout until the client closes the connection; returns 0.

    A `store` that does not exist yet is served (each request reads it afresh), with one
    line on stderr first, so that an operator's mistyped path does not pass unnoticed.
    """
    if not os.path.lexists(store):
        print(
            f"session-kernel: acp-serve: {store}: no such store yet; "
            "requests answer 'not found' until it exists",
            file=sys.stderr,
            flush=True,
        )
    restore = _log_one_line_each()
    try:
        serving = serve(
            store,
            max_line_bytes=max_line_bytes,
            version=version,
            max_decoded_bytes=max_decoded_bytes,
        )
        asyncio.run(serving)
    finally:
        restore()
    return 0


_RAW_FIELDS = ("rawInput", "rawOutput")


def _checked(note: dict[str, Any]) -> dict[str, Any]:
    """One `session/update` params checked against the ACP schema, however deep its values.

    The SDK's models stop at about 255 levels of nesting, while a tool call's
    arguments (`rawInput`) and result (`rawOutput`) may nest without limit. Such a
    note is checked with those two values stubbed out, and sent with them as they
    are: they are opaque JSON to the protocol.
    """
    try:
        return serialize_params(SessionNotification.model_validate(note))
    except (ValueError, RecursionError):
        update = note.get("update")
        if type(update) is not dict or not any(k in update for k in _RAW_FIELDS):
            raise
        raw = {k: update[k] for k in _RAW_FIELDS if k in update}
        stubbed = {**note, "update": {**update, **{key: {} for key in raw}}}
        checked = serialize_params(SessionNotification.model_validate(stubbed))
        checked["update"].update(raw)
        return checked
