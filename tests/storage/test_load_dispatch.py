"""One choice of load path for every layout (`kernel.storage.load.plan_scan`).

The stores hold no load policy: no module under kernel/store/ imports the typed
path or the exact pipeline's pieces, which the imports show. When the typed scan
leaves a line to the exact one, the exact scan reads the lines in hand again
(a Zstandard log's plaintext is not decompressed twice), with the same verdict,
tail and counts as an exact scan from the start.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernel.storage.zstd
from kernel import event_from_json, load_jsonl, load_jsonl_zstd, scan_jsonl, write_jsonl
from kernel.errors import CorruptLog, KernelError
from kernel.storage.jsonl import _scan_plain, loaded_result, scan_result
from kernel.storage.load import TYPED, WIRE, as_wire_scan
from kernel.storage.zstd import encode_zstd_frame
from kernel.values.events import DEFAULT_KNOWN_TYPES, wire_order_of
from kernel.values.json import thaw
from kernel.wire.codec import event_to_wire
from properties import strategies as gen

ROOT = Path(__file__).resolve().parents[2]

TYPED_PATH_MODULES = frozenset(
    {"kernel.storage.typed.lines", "kernel.storage.typed.schema", "kernel.storage.scan"}
)
PIPELINE_NAMES = frozenset(
    {
        "plan_load",
        "plan_events",
        "plan_decoded_events",
        "plan_row_lines",
        "scan_row_lines",
        "scan_events",
        "scan_records",
        "scan_lines",
        "loaded_result",
        "as_wire_scan",
    }
)


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """`(module, name)` of every import in a file (`name` None for `import module`)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.extend((node.module, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize(
    "path", sorted((ROOT / "kernel" / "store").glob("*.py")), ids=lambda p: p.name
)
def test_a_store_module_neither_imports_the_typed_path_nor_chooses_a_path(path: Path) -> None:
    for module, name in _imports(path):
        assert module not in TYPED_PATH_MODULES, (path.name, module)
        assert name not in PIPELINE_NAMES, (path.name, module, name)


HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'
HEADER_RECORD: dict[str, Any] = {"version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _records(*declining: int) -> list[bytes]:
    """Two turns; the `turn/start` at each seq in `declining` is spelled as an older v0
    shape the typed decode refuses (a trigger), which the exact pipeline normalizes."""
    out = []
    for turn, seq in ((1, 0), (2, 2)):
        data: dict[str, Any] = {"turn": turn}
        if seq in declining:
            data["trigger"] = {"kind": "user"}
        out.append(_line({"type": "turn/start", "seq": seq, "time": 1, "data": data}))
        end = {"turn": turn, "reason": {"kind": "completed"}}
        out.append(_line({"type": "turn/end", "seq": seq + 1, "time": 1, "data": end}))
    return out


def _wire(loaded: Any) -> list[Any]:
    return [thaw(event_to_wire(e)) for e in loaded.events]


@pytest.mark.parametrize("declining", [(), (0,), (2,), (0, 2)])
def test_the_exact_scan_reads_again_what_the_typed_scan_left(declining: tuple[int, ...]) -> None:
    data = HEADER + b"".join(_records(*declining))
    scan = _scan_plain(data, typed=True)
    assert scan.kind == (TYPED if not declining else WIRE)
    exact = _scan_plain(data)
    assert as_wire_scan(scan).records == exact.records
    assert scan.committed_bytes == exact.committed_bytes
    loaded = load_jsonl(data, now=0)
    assert _wire(loaded) == _wire(
        loaded_result(exact, session_id=None, known_types=DEFAULT_KNOWN_TYPES)
    )
    assert loaded.normalized.get("turn-start-trigger", 0) == len(declining)


def test_a_torn_tail_after_a_declined_line_is_counted_as_the_exact_scan_counts_it() -> None:
    data = HEADER + b"".join(_records(0)) + b'{"type":"turn/st'
    typed, exact = _scan_plain(data, typed=True), _scan_plain(data)
    facts = ("committed_bytes", "total_bytes", "dropped_records", "torn_reason")
    assert [getattr(typed, f) for f in facts] == [getattr(exact, f) for f in facts]
    assert typed.dropped_records == 1


def test_damage_before_a_turn_end_after_a_declined_line_is_still_corruption() -> None:
    records = _records(0)
    data = HEADER + records[0] + records[1] + b"{garbage\n" + records[2] + records[3]
    with pytest.raises(CorruptLog, match="turn/end follows"):
        load_jsonl(data, now=0)


@pytest.mark.parametrize("declining", [(), (0,), (2,)])
def test_a_zstd_log_whose_typed_scan_declines_is_decompressed_once(
    monkeypatch: pytest.MonkeyPatch, declining: tuple[int, ...]
) -> None:
    records = _records(*declining)
    data = encode_zstd_frame(HEADER) + encode_zstd_frame(b"".join(records[:2]))
    data += encode_zstd_frame(b"".join(records[2:]))
    calls: list[int] = []
    original = kernel.storage.zstd._plaintext

    def counted(*args: Any) -> bytes:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(kernel.storage.zstd, "_plaintext", counted)
    loaded = load_jsonl_zstd(data, now=0)
    assert len(calls) == 3  # one per frame
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"] * 2


@given(gen.loop_logs(rich=True, max_actions=4, shape="any"), st.integers(0, 10**6), st.booleans())
def test_scan_jsonl_by_the_typed_path_is_the_exact_scan(log: Any, cut: int, pack: bool) -> None:
    """`scan_jsonl` takes the typed scan when it reads every line; its `Scan` is the exact
    scan's: the same events (member order included), tail and torn facts, at any cut."""
    data = write_jsonl(HEADER_RECORD, [event_from_json(e) for e in log.events], pack_chunks=pack)
    data = data[: len(data) - cut % (len(data) // 4 + 1)]
    outcomes = []
    for scan in (lambda: scan_jsonl(data), lambda: scan_result(_scan_plain(data))):
        try:
            got = scan()
        except KernelError as exc:
            outcomes.append((type(exc).__name__, str(exc)))
            continue
        events = [(thaw(event_to_wire(e)), wire_order_of(e)) for e in got.events]
        tail = (got.committed_bytes, got.total_bytes, got.dropped_records, got.torn_reason)
        outcomes.append((events, tail, got.header))
    assert outcomes[0] == outcomes[1]


def test_a_plain_read_of_another_layout_names_the_layout(tmp_path: Path) -> None:
    import sqlite3

    from kernel.storage.zstd import write_jsonl_zstd

    framed = write_jsonl_zstd(json.loads(HEADER), [])
    database = tmp_path / "s.db"
    sqlite3.connect(database).execute("CREATE TABLE t (x)").connection.close()
    for data, what in (
        (framed, r"a Zstandard frame: read them with load_jsonl_zstd"),
        (database.read_bytes(), r"a SQLite database: open it with kernel.store.SqliteStore"),
    ):
        for read in (scan_jsonl, lambda d: load_jsonl(d, now=0)):
            with pytest.raises(
                CorruptLog,
                match=f"(not valid JSON: .*|no complete header line); the bytes begin with {what}",
            ):
                read(data)
    with pytest.raises(CorruptLog, match=r"not valid JSON: [^;]*$"):
        scan_jsonl(b"\x00garbage\n")
