"""Benchmark: the time and the memory of a value nested n deep, operation by operation.

    python3 benchmarks/deep_nesting.py                  # arrays 1,000, 100,000, 1,000,000 deep
    python3 benchmarks/deep_nesting.py --shapes arrays objects mixed --depths 1000 100000
    python3 benchmarks/deep_nesting.py --measures load_jsonl append --repeat 3 --json out.json

Each log is a header, a `turn/start`, one event holding the deep value, and a
`turn/end`. The shapes:

- `arrays`: `[[[...]]]`, 2 bytes a level, as `data.d` of an ignorable event of
  a type outside the vocabulary (the hostile-input audit's 2 MB file);
- `objects`: `{"k":{"k":...}}`, 6 bytes a level, in the same place;
- `mixed`: `{"k":[{"k":[...]}]}`, 8 bytes for two levels, as the `meta` member
  of a `user/message`, whose payload rules run on the parsed value.

Past 1,024 levels orjson and msgspec refuse a text, so every measure runs the
kernel's own iterative code. Every measure runs in a fresh process (`--worker`),
which builds its input untimed and then reports: the peak resident set during
one run above the size before it (`VmHWM`, reset first; Linux only), the best
time of `--repeat` runs (a `gc.collect()` before each, the previous result
dropped first), and the `tracemalloc` peak of one more run above its start. The
resident run comes first, before freed memory is kept for reuse. Figures per
level are the peak divided by the depth. `outcome` is `ok`, or for the error
measures the error class and the length of its message.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lean import status_bytes

import kernel
from kernel import (
    APPEND,
    KernelError,
    SessionLog,
    event_to_json,
    load_jsonl,
    load_jsonl_zstd,
    write_jsonl,
)
from kernel.storage.zstd import encode_zstd_frame
from kernel.values.json import json_equal, raw, view
from kernel.wire.jsontext import parse_json

SHAPES: Final = ("arrays", "objects", "mixed")
HEADER: Final = {"version": 0, "id": "deep", "createdAt": 1}
_HEADER_LINE: Final = (
    b'{"type":"session","version":0,"id":"deep","createdAt":1,"delegationDepth":0}'
)
_TURN_START: Final = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'
_OLD_TURN_START: Final = (
    b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}'
)
_TURN_END: Final = (
    b'{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}'
)


def deep_text(shape: str, depth: int, leaf: bytes = b"") -> bytes:
    """The JSON text of the deep value: `depth` levels around `leaf` (an empty array or object
    when `leaf` is empty)."""
    if shape == "arrays":
        return b"[" * depth + leaf + b"]" * depth
    if shape == "objects":
        if not leaf:
            return b'{"k":' * (depth - 1) + b"{}" + b"}" * (depth - 1)
        return b'{"k":' * depth + leaf + b"}" * depth
    pairs = depth // 2
    return b'{"k":[' * pairs + (leaf or b"0") + b"]}" * pairs


def deep_value(shape: str, depth: int, leaf: Any = None) -> Any:
    """The deep value as plain dicts and lists (the parse of `deep_text`, or `leaf` inside)."""
    if shape == "arrays":
        value: Any = [] if leaf is None else [leaf]
        for _ in range(depth - 1):
            value = [value]
    elif shape == "objects":
        value = {} if leaf is None else {"k": leaf}
        for _ in range(depth - 1):
            value = {"k": value}
    else:
        value = 0 if leaf is None else leaf
        for _ in range(depth // 2):
            value = {"k": [value]}
    return value


def deep_event(shape: str, inner: Any) -> tuple[str, Any, dict[str, Any]]:
    """`(type, data, extra wire members)` of the event that holds `inner`, the deep value."""
    if shape == "mixed":
        message = {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
            "meta": inner,
        }
        return "user/message", message, {"surfaceOp": "append"}
    return "x/deep", {"d": inner}, {"ignorable": True}


def deep_line(shape: str, depth: int, leaf: bytes = b"") -> bytes:
    """The stored line of the deep event (seq 1), without its newline."""
    inner = deep_text(shape, depth, leaf)
    if shape == "mixed":
        return (
            b'{"type":"user/message","seq":1,"time":2,"data":{"id":"u1","role":"user",'
            b'"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"meta":'
            + inner
            + b'},"surfaceOp":"append"}'
        )
    return b'{"type":"x/deep","seq":1,"time":2,"ignorable":true,"data":{"d":' + inner + b"}}"


def log_bytes(shape: str, depth: int, *, old_turn_start: bool = False, leaf: bytes = b"") -> bytes:
    """The whole JSONL log: header, turn/start, the deep event, turn/end."""
    start = _OLD_TURN_START if old_turn_start else _TURN_START
    lines = (_HEADER_LINE, start, deep_line(shape, depth, leaf), _TURN_END)
    return b"\n".join(lines) + b"\n"


_COMPLETED: Final = {"kind": "completed"}


def wire_events(shape: str, depth: int) -> list[dict[str, Any]]:
    """The log's events as plain wire dicts (for seed and restore)."""
    event_type, data, extra = deep_event(shape, deep_value(shape, depth))
    return [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": event_type, "seq": 1, "time": 2, "data": data, **extra},
        {
            "type": "turn/end",
            "seq": 2,
            "time": 3,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]


def _append(log: SessionLog, shape: str, inner: Any) -> SessionLog:
    event_type, data, extra = deep_event(shape, inner)
    if "surfaceOp" in extra:
        return log.append(event_type, data, time=2, surface_op=APPEND, ignorable=False)
    return log.append(event_type, data, time=2, ignorable=True)


def _outcome(run: Callable[[], Any]) -> tuple[Any, str]:
    try:
        return run(), "ok"
    except KernelError as exc:
        return None, f"{type(exc).__name__}, message {len(str(exc)):,} chars"


def _prepare(measure: str, shape: str, depth: int) -> Callable[[], Any]:
    """The measured call, its input built now (untimed)."""
    data = log_bytes(shape, depth)
    if measure == "parse_json":
        line = deep_line(shape, depth)
        return lambda: parse_json(line)
    if measure == "load_jsonl":
        return lambda: load_jsonl(data, now=5)
    if measure == "load_jsonl_zstd":
        # What `write_jsonl_zstd` writes (a header frame, then one batch), without a load first.
        records = data[len(_HEADER_LINE) + 1 :]
        zdata = encode_zstd_frame(_HEADER_LINE + b"\n") + encode_zstd_frame(records)
        return lambda: load_jsonl_zstd(zdata, now=5)
    if measure == "load_exact":
        older = log_bytes(shape, depth, old_turn_start=True)
        return lambda: load_jsonl(older, now=5)
    if measure == "load_error":
        damaged = log_bytes(shape, depth, leaf=b"NaN")
        return lambda: load_jsonl(damaged, now=5)
    loaded = load_jsonl(data, now=5)
    events = loaded.events
    if measure == "write_jsonl":
        return lambda: write_jsonl(loaded.header, events)
    if measure == "event_to_json":
        return lambda: event_to_json(events[1])
    if measure == "json_equal":
        other = load_jsonl(data, now=5).events[1].data
        return lambda: json_equal(events[1].data, other)
    if measure == "equality":
        other = load_jsonl(data, now=5).events[1].data
        return lambda: events[1].data == other
    if measure == "hash":
        container = raw(events[1].data)
        return lambda: hash(view(container))  # a new view each run: a view caches its hash
    started = SessionLog.empty(header=HEADER).append("turn/start", {"turn": 1}, time=1)
    if measure == "append":
        inner = deep_value(shape, depth)
        return lambda: _append(started, shape, inner)
    if measure == "append_error":
        bad = deep_value(shape, depth, leaf=math.nan)
        return lambda: _append(started, shape, bad)
    wire = wire_events(shape, depth)
    if measure == "seed":
        return lambda: SessionLog.seed(wire, header=HEADER, now=9)
    if measure == "restore":
        return lambda: SessionLog.restore(wire, header=HEADER)
    raise SystemExit(f"unknown measure {measure!r}")


MEASURES: Final = (
    "parse_json",
    "load_jsonl",
    "load_jsonl_zstd",
    "load_exact",
    "load_error",
    "write_jsonl",
    "event_to_json",
    "json_equal",
    "equality",
    "hash",
    "append",
    "append_error",
    "seed",
    "restore",
)
"""`load_exact`: the log with a `turn/start` in an older shape (Appendix A.1), so the typed
plan declines and the exact pipeline normalizes and admits it. `load_error` and `append_error`:
the value with `NaN` at the bottom (unparsable as text; not lossless JSON as a value)."""


def _reset_peak_rss() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def worker(measure: str, shape: str, depth: int, repeat: int) -> None:
    """One measure in this fresh process: print its figures as one JSON line."""
    run = _prepare(measure, shape, depth)
    gc.collect()
    before = status_bytes("VmRSS")
    _reset_peak_rss()
    result, outcome = _outcome(run)
    rss_peak = status_bytes("VmHWM") - before
    del result
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result, _ = _outcome(run)
        best = min(best, time.perf_counter() - start)
        del result
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    result, _ = _outcome(run)
    traced_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del result
    figures = {"seconds": best, "rss_peak": rss_peak, "traced_peak": traced_peak}
    print(json.dumps({**figures, "outcome": outcome}))


def measure_in_child(
    measure: str, shape: str, depth: int, repeat: int, timeout: float
) -> dict[str, Any]:
    """One row: a fresh process runs one measure; its figures, or why there are none."""
    command = [sys.executable, __file__, "--worker", measure, shape, str(depth)]
    command += ["--repeat", str(repeat)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"outcome": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"outcome": f"the worker failed (exit {done.returncode}): {done.stderr[-300:]}"}
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


def _per_level(size: Any, depth: int) -> str:
    return f"{size / depth:>8.1f}" if isinstance(size, int) else f"{'—':>8}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=["arrays"])
    parser.add_argument("--measures", nargs="+", choices=MEASURES, default=list(MEASURES))
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is kept")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a worker may take")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        measure, shape, depth = args.worker
        worker(measure, shape, int(depth), args.repeat)
        return
    print(f"kernel: {Path(kernel.__file__).parent}")
    print("peaks above the start of the run, in bytes per level; time: best of", args.repeat)
    rows = []
    for shape in args.shapes:
        for depth in args.depths:
            size = len(log_bytes(shape, depth))
            print(f"\n{shape}, {depth:,} levels ({size:,} bytes of JSONL)")
            print(f"{'measure':16} {'time':>10} {'traced':>8} {'RSS':>8}  outcome")
            for measure in args.measures:
                report = measure_in_child(measure, shape, depth, args.repeat, args.timeout)
                rows.append({"shape": shape, "depth": depth, "measure": measure, **report})
                seconds = report.get("seconds")
                shown = f"{seconds * 1000:>8.1f}ms" if seconds is not None else f"{'—':>10}"
                print(
                    f"{measure:16} {shown} {_per_level(report.get('traced_peak'), depth)} "
                    f"{_per_level(report.get('rss_peak'), depth)}  {report['outcome']}",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
