"""Laws on packed chunk rows (docs/format/properties.md §2, §9: P7, P42, P43)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kernel.errors import KernelError, MalformedChunkRow
from kernel.values.events import APPEND, Event
from kernel.values.json import thaw
from kernel.wire.chunks import (
    expand_chunk_row,
    expand_storage_records,
    is_chunk_row,
    pack_chunk_rows,
)
from kernel.wire.codec import event_to_json
from kernel.wire.jsontext import encode_json_bytes
from properties._report import check, violated

__all__ = (
    "batch_events",
    "law_chunk_row_round_trip",
    "law_packing_batch_local",
    "law_chunk_row_validation",
    "ROW_CORRUPTIONS",
)


def batch_events(batch: Sequence[Mapping[str, Any]]) -> list[Event]:
    """G-batch records as `Event`s, built directly (a batch may hold a fractional time or a
    chunk with surface metadata: records a writer stores verbatim, not admitted events)."""
    out = []
    for w in batch:
        out.append(
            Event(
                type=w["type"],
                seq=w["seq"],
                time=w["time"],
                data=copy.deepcopy(w["data"]),
                surface_op=APPEND if w.get("surfaceOp") == "append" else None,
                wire_order=tuple(w),
            )
        )
    return out


def _plain(record: Any) -> Any:
    return event_to_json(record) if isinstance(record, Event) else thaw(record)


def _decode(record_text: str) -> list[Any]:
    """docs/format/events.md §7.5: a row-tagged object is expanded; anything else passes through."""
    value = json.loads(record_text)
    if is_chunk_row(value):
        return [event_to_json(e) for e in expand_chunk_row(value)]
    return [value]


def _text(values: Any) -> str:
    return json.dumps(values, separators=(",", ":"))


def law_chunk_row_round_trip(batch: Sequence[Mapping[str, Any]]) -> None:
    """P7: decoding every packed record after a JSON round trip gives back the batch exactly
    (same keys in the same order, same value types)."""
    law = "P7 chunk-row round trip"
    records = pack_chunk_rows(batch_events(batch))
    decoded = [e for r in records for e in _decode(json.dumps(_plain(r)))]
    expected = json.loads(json.dumps(list(batch)))
    if _text(decoded) != _text(expected):
        violated(
            law,
            "decode(pack(B)) differs from B",
            log=list(batch),
            records=[_plain(r) for r in records],
        )


def _members(record: Any) -> list[int]:
    if isinstance(record, Event):
        return [record.seq]
    data = record["data"]
    n = len(data["texts"] if "texts" in data else data["args"])
    return list(range(record["seq0"], record["seq0"] + n))


def law_packing_batch_local(
    batch: Sequence[Mapping[str, Any]],
    split: int,
    max_members: int = 1024,
    max_bytes: int = 1 << 20,
) -> None:
    """P42: `decode(pack(A + B)) == decode(pack(A) + pack(B))`; packing never reorders; no row has
    fewer than 3 members; bounded packing respects `max_members` and `max_bytes` of row data."""
    law = f"P42 packing is batch-local (split {split}, bounds {max_members}/{max_bytes})"
    events = batch_events(batch)
    k = split % (len(events) + 1)
    whole = pack_chunk_rows(events)
    parts = (*pack_chunk_rows(events[:k]), *pack_chunk_rows(events[k:]))
    bounded = pack_chunk_rows(events, max_members=max_members, max_data_bytes=max_bytes)
    for name, records in (("whole", whole), ("split", parts), ("bounded", bounded)):
        seqs = [s for r in records for s in _members(r)]
        check(
            seqs == [e.seq for e in events],
            law,
            f"{name}: records reorder or lose seqs {seqs}",
            log=list(batch),
        )
        decoded = [e for r in records for e in _decode(json.dumps(_plain(r)))]
        check(
            _text(decoded) == _text(json.loads(json.dumps(list(batch)))),
            law,
            f"{name}: decoding the packed records does not give the batch",
            log=list(batch),
        )
        for r in records:
            if not isinstance(r, Event):
                check(len(_members(r)) >= 3, law, f"{name}: a row with {len(_members(r))} members")
    for r in bounded:
        if not isinstance(r, Event):
            size = len(encode_json_bytes(r["data"]))
            check(
                len(_members(r)) <= max_members and size <= max_bytes,
                law,
                f"bounded: a row of {len(_members(r))} members and {size} data bytes",
            )


def _set(path: Sequence[str], value: Any) -> Any:
    def edit(row: dict[str, Any]) -> bool:
        target = row
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return True

    return edit


def _drop(path: Sequence[str]) -> Any:
    def edit(row: dict[str, Any]) -> bool:
        target = row
        for key in path[:-1]:
            target = target[key]
        if path[-1] not in target:
            return False
        del target[path[-1]]
        return True

    return edit


def _members_key(row: dict[str, Any]) -> str:
    return "texts" if "texts" in row["data"] else "args"


def _member_edit(kind: str) -> Any:
    def edit(row: dict[str, Any]) -> bool:
        key = _members_key(row)
        if kind == "not-array":
            row["data"][key] = "abc"
        elif kind == "empty":
            row["data"][key] = []
            row["data"]["dt"] = []
        else:
            row["data"][key][0] = 5
        return True

    return edit


def _dt_edit(kind: str) -> Any:
    def edit(row: dict[str, Any]) -> bool:
        dt = row["data"]["dt"]
        if kind == "not-array":
            row["data"]["dt"] = 1
            return True
        if kind == "arity":
            dt.append(1)
            return True
        if not dt:
            return False
        dt[0] = {"fraction": 0.5, "bool": True, "huge": 2**53, "string": "1"}[kind]
        return True

    return edit


def _seq_range(row: dict[str, Any]) -> bool:
    n = len(row["data"][_members_key(row)])
    if n < 2:
        return False
    row["seq0"] = 2**53 - n + 1  # the last member lands exactly on 2**53
    return True


def _time_range(row: dict[str, Any]) -> bool:
    if not row["data"]["dt"]:
        return False
    row["time0"] = 2**53 - 1
    row["data"]["dt"][0] = 1
    return True


def _name_edit(row: dict[str, Any]) -> bool:
    if "args" not in row["data"]:
        return False
    row["data"]["name"] = 3
    return True


def _id_edit(row: dict[str, Any]) -> bool:
    if "args" not in row["data"]:
        return False
    row["data"]["id"] = None
    return True


ROW_CORRUPTIONS: dict[str, Any] = {
    "envelope extra key": _set(["extra"], 1),
    "envelope missing time0": _drop(["time0"]),
    "seq0 negative": _set(["seq0"], -1),
    "seq0 fraction": _set(["seq0"], 1.5),
    "seq0 string": _set(["seq0"], "1"),
    "seq0 2**53": _set(["seq0"], 2**53),
    "time0 fraction": _set(["time0"], 0.5),
    "time0 bool": _set(["time0"], True),
    "time0 2**53": _set(["time0"], 2**53),
    "data not object": _set(["data"], [1]),
    "data extra key": _set(["data", "extra"], 1),
    "data missing turn": _drop(["data", "turn"]),
    "turn not number": _set(["data", "turn"], "1"),
    "step bool": _set(["data", "step"], True),
    "index null": _set(["data", "index"], None),
    "id not string": _id_edit,
    "name not string": _name_edit,
    "members not array": _member_edit("not-array"),
    "members empty": _member_edit("empty"),
    "member not string": _member_edit("element"),
    "dt not array": _dt_edit("not-array"),
    "dt fraction": _dt_edit("fraction"),
    "dt bool": _dt_edit("bool"),
    "dt beyond safe": _dt_edit("huge"),
    "dt string": _dt_edit("string"),
    "arity": _dt_edit("arity"),
    "seq range": _seq_range,
    "time range": _time_range,
}
"""Single-field corruptions of a valid chunk row (docs/format/events.md §7.6), by the label
`law_chunk_row_validation(corruption=...)` takes."""


def law_chunk_row_validation(row: Mapping[str, Any], corruption: str) -> None:
    """P43: a single-field corruption of a valid row raises `MalformedChunkRow` and is never
    returned as an event (the valid row expands). `corruption` is a key of `ROW_CORRUPTIONS`."""
    law = f"P43 chunk row validation [{corruption}]"
    valid = thaw(row)
    expanded = expand_chunk_row(valid)
    check(bool(expanded), law, "a valid row expanded to nothing", row=valid)
    damaged = copy.deepcopy(valid)
    if not ROW_CORRUPTIONS[corruption](damaged):
        return
    decoders: tuple[tuple[str, Callable[[], tuple[Event, ...]]], ...] = (
        ("expand_chunk_row", lambda: expand_chunk_row(damaged)),
        ("expand_storage_records", lambda: expand_storage_records([damaged])),
    )
    for path, decode in decoders:
        try:
            events = decode()
        except MalformedChunkRow:
            continue
        except KernelError as exc:
            violated(law, f"{path} raised {exc!r}, not MalformedChunkRow", row=damaged)
        except Exception as exc:
            violated(law, f"{path} let {exc!r} escape", row=damaged)
        violated(
            law,
            f"{path} accepted the corrupt row",
            row=damaged,
            events=[event_to_json(e) for e in events],
        )
