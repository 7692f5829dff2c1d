"""`session-kernel acp-serve STORE`: a read-only ACP agent over stdio that replays stored sessions.

Built on the official SDK (`acp`, the `acp` extra). It answers `initialize`,
`session/list` and `session/load` (the whole session replayed as
`kernel.projections.acp_updates`, then the response), and refuses every request
that would run a model or change a session with a protocol error. The store is
opened afresh for each request, read-only, so a missing or damaged store or
session costs that request an error and the agent keeps serving.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from acp import PROTOCOL_VERSION, Agent, Client, RequestError, run_agent
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

from kernel.cli.sources import SQLITE, describe_os_error, kind_of, open_log, session_ids
from kernel.errors import KernelError
from kernel.events import Event, SessionHeader
from kernel.json import summary
from kernel.projections import acp_updates
from kernel.store.errors import SessionNotFound
from kernel.store.jsonl import JsonlStore

__all__ = (
    "READ_ONLY",
    "NOT_FOUND",
    "CANNOT_READ",
    "ReplayAgent",
    "StoreReader",
    "run_acp_serve",
)

READ_ONLY: Final = -32600
"""The code of a refused request: prompts, new sessions and edits (the agent only replays)."""
NOT_FOUND: Final = -32002
"""ACP's "resource not found": no such store or session."""
CANNOT_READ: Final = -32603
"""A store or session that exists but cannot be read or admitted (damaged, unsupported)."""

_REFUSAL: Final = (
    "session-kernel acp-serve is read-only: it replays stored sessions and does not run "
    "prompts, create, fork, resume or change sessions"
)


def _now() -> int:
    return int(time.time() * 1000)


class StoreReader:
    """A store named on the command line: a JSONL store directory, a SQLite database, or
    one JSONL log file. Every call reads afresh and writes nothing."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _jsonl_store(self) -> JsonlStore:
        root = Path(self.path)
        zstd = next(root.glob("*/*/session.jsonl.zstd"), None) is not None
        return JsonlStore(root, zstd=zstd)

    def headers(self) -> list[SessionHeader]:
        """The headers of every stored session."""
        target = Path(self.path)
        if target.is_dir():
            return list(self._jsonl_store().list())
        kind = kind_of(target) or "jsonl"
        return [
            open_log(self.path, kind, session=sid, now=_now()).header
            for sid in session_ids(self.path, kind, session=None)
        ]

    def balanced(self, session_id: str) -> tuple[SessionHeader, tuple[Event, ...]]:
        """The header and balanced events (stored prefix + closers) of one session."""
        target = Path(self.path)
        if target.is_dir():
            stored = self._jsonl_store().inspect(session_id, now=_now())
            return stored.header, stored.events
        kind = kind_of(target) or "jsonl"
        if kind == SQLITE:
            opened = open_log(self.path, kind, session=session_id, now=_now())
        else:
            opened = open_log(self.path, kind, session=None, now=_now())
            if opened.session != session_id:
                raise SessionNotFound(f"no stored session {summary(session_id)} in {self.path}")
        return opened.header, (*opened.stored, *opened.closers)


@contextmanager
def _protocol_errors(what: str) -> Iterator[None]:
    """Turn a failed read into the protocol error the client gets."""
    try:
        yield
    except SessionNotFound as exc:
        raise RequestError(NOT_FOUND, f"{what}: {exc}", {"errorClass": "SessionNotFound"}) from None
    except FileNotFoundError as exc:
        raise RequestError(
            NOT_FOUND, f"{what}: no such store: {exc.filename}", {"errorClass": "FileNotFound"}
        ) from None
    except KernelError as exc:
        name = type(exc).__name__
        raise RequestError(CANNOT_READ, f"{what}: {name}: {exc}", {"errorClass": name}) from None
    except OSError as exc:
        raise RequestError(
            CANNOT_READ, f"{what}: {describe_os_error(exc)}", {"errorClass": type(exc).__name__}
        ) from None


class ReplayAgent(Agent):
    """The ACP agent of `acp-serve`: lists and replays the sessions of one store."""

    def __init__(self, store: StoreReader, *, version: str = "unknown") -> None:
        self.store = store
        self.version = version
        self._client: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._client = conn

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

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        with _protocol_errors(f"cannot list {self.store.path}"):
            headers = self.store.headers()
        sessions = [
            SessionInfo(session_id=h.id, cwd=h.cwd or "/")
            for h in headers
            if cwd is None or h.cwd == cwd
        ]
        return ListSessionsResponse(sessions=sessions)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        with _protocol_errors(f"cannot load session {summary(session_id)}"):
            header, events = self.store.balanced(session_id)
            notes = acp_updates(events, session_id=header.id)
        client = self._client
        assert client is not None, "the connection calls on_connect first"
        for note in notes:
            update = SessionNotification.model_validate(note).update
            await client.session_update(session_id=note["sessionId"], update=update)
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


def run_acp_serve(store: str, *, version: str = "unknown") -> int:
    """Serve ACP on stdin/stdout until the client closes the connection; returns 0."""
    asyncio.run(run_agent(ReplayAgent(StoreReader(store), version=version)))
    return 0
