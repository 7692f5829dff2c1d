"""Lean-process benchmarks: every measure in its own fresh interpreter, as a ratio to the decode.

    python3 benchmarks/lean.py                          # the default logs (below)
    python3 benchmarks/lean.py --sizes 10000 100000 1000000 --dsh --compaction --adversarial
    python3 benchmarks/lean.py --replacements 0 1000 10000 --sizes --dsh --adversarial
    python3 benchmarks/lean.py --json figures.json --timeout 300

The parent builds each log once (realistic logs of `--sizes` events, the same
generator in DSH's agent-loop order for each `--dsh` size, the compaction-heavy
log of `--compaction` events at each `--replacements` rate per 100k events,
adversarial logs of N appends then N replacements for each `--adversarial` N),
writes it with `write_jsonl` and `write_jsonl_zstd` into a temporary directory,
then starts one worker process per measure (`lean.py --worker MEASURE FILE`). The
worker reads the file's bytes, does the measure's set-up untimed, runs the measured
work `--repeat` times with the cyclic collector in its default state (a
`gc.collect()` before each run, the previous run's result dropped first) and prints
one JSON line per run; the parent keeps the best. The decode floor (`orjson.loads`
of every line) runs in the same kind of worker, so both sides pay the same small
heap. The folds, seed and restore each run on a log loaded afresh in the worker
before every run (its own `load_jsonl`, untimed). A worker past `--timeout`
seconds is killed and its completed runs are kept; when `load_jsonl` does not
finish all its runs, the measures that need a loaded log are skipped. The writes
(`write_jsonl` packed and plain, `write_jsonl_zstd`) write the header and
events of a log loaded afresh the same way. Each run of a measure other than
`append` and `memory` also reports the most resident memory it added
(`rss_peak`, from Linux's `VmHWM` reset just before it; in the JSON figures),
printed for the writes as a multiple of what they wrote. The SQLite
measure appends the log's stored events to a new store (untimed, once per
worker) and times `SqliteStore.inspect` of it.

Memory (one worker): the peak and the retained size of one `load_jsonl`,
with the input bytes read before measuring, once as resident-set growth
(peak from the high-water mark `VmHWM`, Linux only) and once under
`tracemalloc`; peaks as a multiple of the JSONL file size, retained as bytes
per event.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime
import gc
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import attrs
import orjson
import zstandard

import kernel
from kernel import (
    APPEND,
    Event,
    SessionLog,
    check_invariants,
    derive_messages,
    event_from_json,
    fold_request_header,
    fold_surface,
    interrupted_turn_closers,
    load_jsonl,
    load_jsonl_zstd,
    scan_jsonl,
    tool_pairing_cuts,
    write_jsonl,
    write_jsonl_zstd,
)
from kernel.projections import acp_updates, anthropic_request, openai_request
from kernel.store.sqlite import SqliteStore
from kernel.values.payloads import RequestHeaderData, UserMessage

__all__ = ("MEASURES", "Measure", "main")

_SCRIPT: Final = Path(__file__).resolve()
_APPENDS: Final = 1000
_APPEND_MESSAGE: Final[UserMessage] = {
    "id": "bench",
    "role": "user",
    "content": [{"type": "text", "text": "hi"}],
    "source": {"kind": "user"},
}

# -- the worker: one measure in a fresh process -------------------------------------------------

Sample = dict[str, Any]
"""One run's report: `seconds` and what the run produced (counts, to check the log)."""


def decode_lines(data: bytes) -> list[Any]:
    """The decode floor: `orjson.loads` of every non-empty line."""
    return [orjson.loads(line) for line in data.split(b"\n") if line]


def _decompress(data: bytes) -> bytes:
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        out: bytes = reader.read()
    return out


_DRY: list[bool] = [False]
"""Set by `--dry`: each run does its set-up but not the measured work (the set-up's own
instruction count, which `benchmarks/instructions.py` subtracts)."""


def _timed(work: Callable[[], Any], describe: Callable[[Any], Sample]) -> Sample:
    """One run of `work`: its seconds, what `describe` reads of its result, and `rss_peak`,
    the most resident memory the run added (Linux's `VmHWM`, reset just before; 0
    elsewhere), the result included."""
    gc.collect()
    if _DRY[0]:
        return {"seconds": 0.0, "dry": True}
    before = status_bytes("VmRSS")
    _reset_peak_rss()
    start = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "rss_peak": max(status_bytes("VmHWM") - before, 0),
        **describe(result),
    }


def _whole(
    work: Callable[[bytes], Any], describe: Callable[[Any], Sample]
) -> Callable[[bytes], Sample]:
    """A measure of the whole bytes (decode, load)."""
    return lambda data: _timed(lambda: work(data), describe)


def _on_fresh_load(
    work: Callable[[tuple[Event, ...]], Any],
    describe: Callable[[Any], Sample],
    *,
    cold: bool = False,
) -> Callable[[bytes], Sample]:
    """A measure of the events of a log loaded (untimed) just before the run; `cold`: the
    same events copied into a plain tuple, so the fold cannot take what the load kept."""

    def run(data: bytes) -> Sample:
        events = load_jsonl(data, now=0).events
        if cold:
            events = tuple(events)
        return _timed(lambda: work(events), describe)

    return run


def _cold(measure: Measure) -> Measure:
    """`measure` over the loaded events in a plain tuple (see `_on_fresh_load`)."""
    return attrs.evolve(
        measure,
        name=f"{measure.name}_cold",
        label=f"{measure.label}, plain tuple",
        run=_COLD_RUNS[measure.name],
    )


def _written(write: Callable[..., bytes], *, pack_chunks: bool = True) -> Callable[[bytes], Sample]:
    """A measure of writing a log loaded (untimed) just before the run, header and events
    as the load gives them: the rewrite a store does of what it read."""

    def run(data: bytes) -> Sample:
        loaded = load_jsonl(data, now=0)
        header, events = loaded.header, loaded.events
        return _timed(lambda: write(header, events, pack_chunks=pack_chunks), _sized("bytes"))

    return run


def _parsed_dicts(data: bytes) -> list[Any]:
    """The log's events as a JSON parser gives them to an embedder: one wire dict per event,
    chunk rows unpacked (the log is loaded and written unpacked, then decoded)."""
    loaded = load_jsonl(data, now=0)
    lines = write_jsonl(loaded.header, loaded.events, pack_chunks=False).split(b"\n")
    del loaded
    return decode_lines(b"\n".join(lines[1:]))  # the first line is the session header


def _on_parsed_dicts(
    work: Callable[[list[Any]], Any], describe: Callable[[Any], Sample]
) -> Callable[[bytes], Sample]:
    """A measure of the log's parsed wire dicts, made (untimed) just before the run."""

    def run(data: bytes) -> Sample:
        wires = _parsed_dicts(data)
        return _timed(lambda: work(wires), describe)

    return run


def _events_from_json(wires: list[Any]) -> list[Event]:
    return [event_from_json(wire) for wire in wires]


_BENCH_HEADER: Final[RequestHeaderData] = {
    "header": {"config": {"provider": "deepseek", "model": "deepseek-chat"}},
    "reason": "initial",
}


def _with_header(events: tuple[Event, ...]) -> tuple[Event, ...]:
    """The events, plus a `request/header` at the end when none is in force (the
    adversarial logs have none, and a request body needs a model)."""
    log = SessionLog.restore(events)
    if log.request_header is not None:
        return events
    return tuple(log.append("request/header", _BENCH_HEADER, time=0).events)


def _request_body(
    project: Callable[[tuple[Event, ...]], dict[str, Any]],
) -> Callable[[bytes], Sample]:
    """A provider-body measure: the loaded events (a header added if needed) untimed."""

    def run(data: bytes) -> Sample:
        events = _with_header(load_jsonl(data, now=0).events)
        return _timed(lambda: project(events), lambda r: {"messages": len(r["messages"])})

    return run


def _sized(key: str) -> Callable[[Any], Sample]:
    return lambda result: {key: len(result)}


def _loaded(result: Any) -> Sample:
    return {"events": len(result.events), "closers": len(result.closers)}


def _surface(result: Any) -> Sample:
    return {"nodes": len(result.nodes), "replacements": len(result.replacements)}


_STORE: dict[str, Any] = {}  # the worker's SQLite store, made on its first run


def _sqlite_inspect(data: bytes) -> Sample:
    """`SqliteStore.inspect` of the log's stored events, appended (untimed, once per worker)
    to a new store in a temporary directory, chunk rows packed."""
    if not _STORE:
        loaded = load_jsonl(data, now=0)
        directory = tempfile.mkdtemp(prefix="lean-sqlite-")
        atexit.register(shutil.rmtree, directory, True)
        store = SqliteStore(Path(directory) / "bench.db")
        atexit.register(store.close)
        store.create(loaded.header)
        store.append(loaded.header.id, loaded.events[: len(loaded.events) - len(loaded.closers)])
        _STORE.update(store=store, id=loaded.header.id)
        del loaded
    store, session_id = _STORE["store"], _STORE["id"]
    return _timed(lambda: store.inspect(session_id), lambda r: {"events": len(r.events)})


def _append(data: bytes) -> Sample:
    """Seconds per append of a user message at the end of the loaded log (mean of 1,000)."""
    loaded = load_jsonl(data, now=0)
    log = SessionLog.restore(loaded.events, header=loaded.header)
    gc.collect()
    current = log
    start = time.perf_counter()
    for i in range(0 if _DRY[0] else _APPENDS):
        current = current.append("user/message", _APPEND_MESSAGE, time=i, surface_op=APPEND)
    seconds = (time.perf_counter() - start) / _APPENDS
    return {"seconds": seconds, "events": len(log.events)}


def status_bytes(field: str) -> int:
    """A size from /proc/self/status (`VmRSS`, `VmHWM`) in bytes; 0 where there is none."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak_rss() -> None:
    """Start the resident-set high-water mark (`VmHWM`) again from the current size (Linux)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _memory(data: bytes) -> Sample:
    """Peak and retained memory of one `load_jsonl`: resident-set growth, then tracemalloc.

    The resident-set peak is the process's high-water mark (`VmHWM`), reset just
    before the load: `ru_maxrss` would also count what the process inherited from
    a large parent at fork.
    """
    gc.collect()
    before = status_bytes("VmRSS")
    _reset_peak_rss()
    loaded = load_jsonl(data, now=0)
    rss_peak = status_bytes("VmHWM") - before
    gc.collect()
    rss_retained = status_bytes("VmRSS") - before
    events = len(loaded.events)
    del loaded
    gc.collect()
    tracemalloc.start()
    loaded = load_jsonl(data, now=0)
    gc.collect()
    traced_retained, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(loaded.events) == events
    return {
        "seconds": 0.0,
        "events": events,
        "file_bytes": len(data),
        "rss_peak": rss_peak,
        "rss_retained": rss_retained,
        "traced_peak": traced_peak,
        "traced_retained": traced_retained,
    }


@attrs.frozen
class Measure:
    """One measure: its table label, which file it reads, and the worker's run."""

    name: str
    label: str
    run: Callable[[bytes], Sample]
    zstd: bool = False
    needs_load: bool = False
    repeats: bool = True
    versus: str | None = None
    """Another measure this one is also shown as a ratio to (run before it)."""


_FOLDS: Final[dict[str, tuple[Callable[[Any], Any], Callable[[Any], Sample]]]] = {
    "fold_surface": (fold_surface, _surface),
    "derive_messages": (derive_messages, _sized("messages")),
    "tool_pairing_cuts": (tool_pairing_cuts, _sized("cuts")),
    "fold_request_header": (fold_request_header, lambda r: {"header": r is not None}),
    "interrupted_turn_closers": (interrupted_turn_closers, _sized("closers")),
    "check_invariants": (check_invariants, _sized("violations")),
}
_COLD_RUNS: Final = {
    name: _on_fresh_load(work, describe, cold=True) for name, (work, describe) in _FOLDS.items()
}


_MEASURED: Final = (
    Measure("decode", "orjson decode (floor)", _whole(decode_lines, _sized("lines"))),
    Measure(
        "decode_zstd",
        "zstd decompress + orjson decode",
        _whole(lambda d: decode_lines(_decompress(d)), _sized("lines")),
        zstd=True,
    ),
    Measure("load_jsonl", "load_jsonl", _whole(lambda d: load_jsonl(d, now=0), _loaded)),
    Measure("scan_jsonl", "scan_jsonl", _whole(scan_jsonl, lambda r: {"events": len(r.events)})),
    Measure(
        "load_jsonl_zstd",
        "load_jsonl_zstd",
        _whole(lambda d: load_jsonl_zstd(d, now=0), _loaded),
        zstd=True,
    ),
    Measure(
        "seed",
        "SessionLog.seed (admission)",
        _on_fresh_load(lambda e: SessionLog.seed(e, now=0), lambda r: {"events": len(r.events)}),
        needs_load=True,
    ),
    Measure(
        "restore",
        "SessionLog.restore",
        _on_fresh_load(SessionLog.restore, lambda r: {"events": len(r.events)}),
        needs_load=True,
    ),
    Measure(
        "event_from_json",
        "event_from_json of parsed dicts",
        _on_parsed_dicts(_events_from_json, _sized("events")),
        needs_load=True,
        versus="load_jsonl",
    ),
    Measure(
        "restore_dicts",
        "restore of parsed dicts",
        _on_parsed_dicts(SessionLog.restore, lambda r: {"events": len(r.events)}),
        needs_load=True,
        versus="load_jsonl",
    ),
    Measure("write_jsonl", "write_jsonl of a loaded log", _written(write_jsonl), needs_load=True),
    Measure(
        "write_jsonl_plain",
        "write_jsonl, pack_chunks=False",
        _written(write_jsonl, pack_chunks=False),
        needs_load=True,
    ),
    Measure(
        "write_jsonl_zstd",
        "write_jsonl_zstd of a loaded log",
        _written(write_jsonl_zstd),
        needs_load=True,
    ),
    Measure(
        "fold_surface", "fold_surface", _on_fresh_load(fold_surface, _surface), needs_load=True
    ),
    Measure(
        "derive_messages",
        "derive_messages",
        _on_fresh_load(derive_messages, _sized("messages")),
        needs_load=True,
    ),
    Measure(
        "check_invariants",
        "check_invariants",
        _on_fresh_load(check_invariants, _sized("violations")),
        needs_load=True,
    ),
    Measure(
        "tool_pairing_cuts",
        "tool_pairing_cuts",
        _on_fresh_load(tool_pairing_cuts, _sized("cuts")),
        needs_load=True,
    ),
    Measure(
        "fold_request_header",
        "fold_request_header",
        _on_fresh_load(fold_request_header, lambda r: {"header": r is not None}),
        needs_load=True,
    ),
    Measure(
        "interrupted_turn_closers",
        "interrupted_turn_closers",
        _on_fresh_load(interrupted_turn_closers, _sized("closers")),
        needs_load=True,
    ),
    Measure(
        "acp_updates",
        "acp_updates (transcript)",
        _on_fresh_load(lambda e: acp_updates(e, session_id="bench"), _sized("notifications")),
        needs_load=True,
        versus="derive_messages",
    ),
    Measure(
        "openai_request",
        "openai_request",
        _request_body(openai_request),
        needs_load=True,
        versus="derive_messages",
    ),
    Measure(
        "anthropic_request",
        "anthropic_request",
        _request_body(anthropic_request),
        needs_load=True,
        versus="derive_messages",
    ),
    Measure("append", "append (one event, at the end)", _append, needs_load=True),
    Measure("inspect_sqlite", "SqliteStore.inspect", _sqlite_inspect, needs_load=True),
    Measure("memory", "memory of one load_jsonl", _memory, repeats=False),
)
MEASURES: Final = (*_MEASURED, *(_cold(m) for m in _MEASURED if m.name in _COLD_RUNS))
"""Every measure: those above, then the folds again over a plain tuple (`_cold`)."""
_BY_NAME: Final = {m.name: m for m in MEASURES}


def work(measure: str, path: Path, repeat: int) -> None:
    """The worker: read the file, run `measure` `repeat` times, print one JSON line per run."""
    run = _BY_NAME[measure].run
    data = path.read_bytes()
    for _ in range(repeat if _BY_NAME[measure].repeats else 1):
        sample = run(data)
        print(json.dumps(sample), flush=True)
        del sample
        gc.collect()


# -- the parent: build the logs, start the workers, print the table -----------------------------


@attrs.frozen
class Prepared:
    """A benchmark log written to disk, and what it holds."""

    name: str
    jsonl: Path
    zstd: Path
    events: int
    replacements: int
    chunk_share: float
    lines: int
    jsonl_bytes: int
    zstd_bytes: int


@attrs.frozen
class Outcome:
    """What one worker reported: `status` is ok, timeout, error or skipped."""

    status: str
    samples: tuple[Sample, ...] = ()
    wanted: int = 0
    note: str = ""

    @property
    def best(self) -> float | None:
        return min((s["seconds"] for s in self.samples), default=None)


def _size_label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def _log_builders(args: argparse.Namespace) -> list[tuple[str, Callable[[], list[Any]]]]:
    """(name, build) of every log the arguments ask for; the generators load only here."""
    from logs import adversarial_log, compaction_heavy_log
    from realistic import realistic_log

    builders: list[tuple[str, Callable[[], list[Any]]]] = []
    for size in args.sizes:
        builders.append((f"realistic {_size_label(size)}", partial(realistic_log, size, size)))
    for size in args.dsh:
        build = partial(realistic_log, size, size, shape="dsh")
        builders.append((f"dsh-realistic {_size_label(size)}", build))
    for size in args.compaction:
        for rate in args.replacements:
            name = f"compaction-heavy {_size_label(size)} ({rate} repl./100k)"
            build = partial(compaction_heavy_log, size, size, replacements_per_100k=rate)
            builders.append((name, build))
    for n in args.adversarial:
        name = f"adversarial {_size_label(n)} appends + {n} replacements"
        builders.append((name, partial(adversarial_log, n)))
    return builders


def prepare(name: str, wire: list[dict[str, Any]], directory: Path, *, verify: bool) -> Prepared:
    """Write `wire` as JSONL and as Zstandard-framed JSONL; with `verify`, admit it first."""
    from logs import count_replacements

    from kernel import SessionHeader, event_from_json, write_jsonl, write_jsonl_zstd

    if verify:
        log = SessionLog.restore(wire)
        violations = check_invariants(log.events)
        if violations:
            raise SystemExit(f"{name}: generated log breaks an invariant: {violations[0]}")
    events = [event_from_json(w) for w in wire]
    header = SessionHeader(id="bench", created_at=1_760_000_000_000, cwd="/bench")
    stem = "".join(c if c.isalnum() else "-" for c in name)
    jsonl, zstd = directory / f"{stem}.jsonl", directory / f"{stem}.jsonl.zstd"
    data = write_jsonl(header, events)
    jsonl.write_bytes(data)
    zstd.write_bytes(write_jsonl_zstd(header, events))
    chunks = sum(1 for w in wire if w["type"] == "assistant/chunk")
    return Prepared(
        name=name,
        jsonl=jsonl,
        zstd=zstd,
        events=len(wire),
        replacements=count_replacements(wire),
        chunk_share=chunks / max(len(wire), 1),
        lines=data.count(b"\n"),
        jsonl_bytes=len(data),
        zstd_bytes=zstd.stat().st_size,
    )


def _parse_samples(stdout: bytes | None) -> tuple[Sample, ...]:
    samples = []
    for line in (stdout or b"").splitlines():
        try:
            sample = json.loads(line)
        except ValueError:
            continue
        if isinstance(sample, dict) and "seconds" in sample:
            samples.append(sample)
    return tuple(samples)


def run_worker(measure: Measure, log: Prepared, repeat: int, timeout: float) -> Outcome:
    """Start a fresh worker process for one measure on one log and collect its runs."""
    wanted = repeat if measure.repeats else 1
    path = log.zstd if measure.zstd else log.jsonl
    command = [sys.executable, str(_SCRIPT), "--worker", measure.name, str(path)]
    command += ["--repeat", str(wanted)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        samples = _parse_samples(expired.stdout)
        return Outcome("timeout", samples, wanted, f"killed after {timeout:g} s")
    samples = _parse_samples(done.stdout)
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return Outcome("error", samples, wanted, lines[-1] if lines else f"exit {done.returncode}")
    return Outcome("ok", samples, wanted)


def _row(label: str, value: str, ratio: str, per_event: str, runs: str) -> str:
    return f"  {label:<34}{value:>12}{ratio:>10}{per_event:>11}  {runs}"


def _runs(outcome: Outcome) -> str:
    if outcome.status == "ok":
        return f"{len(outcome.samples)}/{outcome.wanted}"
    if outcome.status == "skipped":
        return f"skipped: {outcome.note}"
    return f"{len(outcome.samples)}/{outcome.wanted} {outcome.status}: {outcome.note}"


def _format(measure: Measure, outcome: Outcome, log: Prepared, decode: float | None) -> list[str]:
    best = outcome.best
    runs = _runs(outcome)
    if best is None:
        shown = "skipped" if outcome.status == "skipped" else outcome.status
        return [_row(measure.label, shown, "", "", runs)]
    if measure.name == "memory":
        s = outcome.samples[0]
        size = s["file_bytes"] or 1
        events = s["events"] or 1
        return [
            _row(
                "memory: load peak, tracemalloc",
                f"{s['traced_peak'] / 1e6:.1f} MB",
                f"{s['traced_peak'] / size:.2f}x",
                "",
                "x file size",
            ),
            _row(
                "memory: load peak, RSS growth",
                f"{s['rss_peak'] / 1e6:.1f} MB",
                f"{s['rss_peak'] / size:.2f}x",
                "",
                "x file size",
            ),
            _row(
                "memory: retained, tracemalloc",
                f"{s['traced_retained'] / 1e6:.1f} MB",
                "",
                f"{s['traced_retained'] / events:.0f} B",
                "per event",
            ),
            _row(
                "memory: retained, RSS growth",
                f"{s['rss_retained'] / 1e6:.1f} MB",
                "",
                f"{s['rss_retained'] / events:.0f} B",
                "per event",
            ),
        ]
    if measure.name == "append":
        return [_row(measure.label, f"{best * 1e6:.1f} us", "", f"{best * 1e6:.1f}", runs)]
    ratio = f"{best / decode:.2f}" if decode else ""
    per_event = f"{best / max(log.events, 1) * 1e6:.2f}"
    rows = [_row(measure.label, f"{best:.3f}", ratio, per_event, runs)]
    peaks = [s["rss_peak"] for s in outcome.samples if s.get("rss_peak") and "bytes" in s]
    if peaks:  # a write: the most it held, as a multiple of what it wrote
        written = outcome.samples[0]["bytes"] or 1
        peak = max(peaks)
        rows.append(
            _row(
                "  peak RSS growth",
                f"{peak / 1e6:.1f} MB",
                f"{peak / written:.2f}x",
                "",
                "x output size",
            )
        )
    return rows


def _kernel_source() -> str:
    where = Path(kernel.__file__).resolve().parent
    root = where.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", where.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return str(where)
    changed = [p for p in dirty if p.endswith(".py")]
    return f"{where} (git {head}{', changed: ' + ' '.join(changed) if changed else ''})"


def measure_log(
    log: Prepared, measures: Sequence[Measure], args: argparse.Namespace
) -> dict[str, Outcome]:
    """Run every measure on one log in its own worker, printing each row as it comes."""
    print(
        f"\n{log.name}: {log.events:,} events ({log.chunk_share:.0%} assistant/chunk), "
        f"{log.replacements:,} replacements; JSONL {log.jsonl_bytes / 1e6:.2f} MB in "
        f"{log.lines:,} lines, zstd {log.zstd_bytes / 1e6:.2f} MB"
    )
    print(_row("measure", "best s", "x decode", "us/event", "runs"), flush=True)
    outcomes: dict[str, Outcome] = {}
    for measure in measures:
        load = outcomes.get("load_jsonl")
        if measure.needs_load and load is not None and load.status != "ok":
            outcome = Outcome("skipped", note="load_jsonl did not finish")
        else:
            outcome = run_worker(measure, log, args.repeat, args.timeout)
        outcomes[measure.name] = outcome
        decode = outcomes["decode"].best if "decode" in outcomes else None
        for line in _format(measure, outcome, log, decode):
            print(line, flush=True)
        versus = outcomes.get(measure.versus) if measure.versus else None
        if versus is not None and versus.best and outcome.best is not None:
            ratio = f"{outcome.best / versus.best:.2f}x"
            print(_row(f"  as a ratio to {measure.versus}", ratio, "", "", ""), flush=True)
    return outcomes


def _report(log: Prepared, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    decode = outcomes["decode"].best if "decode" in outcomes else None
    figures: dict[str, Any] = {}
    for name, outcome in outcomes.items():
        best = None if name == "memory" else outcome.best
        per_event = None if best is None else best / max(log.events, 1) * 1e6
        figures[name] = {
            "status": outcome.status,
            "note": outcome.note,
            "runs": len(outcome.samples),
            "wanted": outcome.wanted,
            "best_seconds": best,
            "x_decode": best / decode if best is not None and decode else None,
            "us_per_event": per_event,
            "samples": list(outcome.samples),
        }
        if name == "append" and best is not None:
            figures[name].update(x_decode=None, us_per_event=best * 1e6)
        versus = _BY_NAME[name].versus if name in _BY_NAME else None
        base = outcomes[versus].best if versus in outcomes else None
        if versus is not None and best is not None and base:
            figures[name][f"x_{versus}"] = best / base
    return {
        **attrs.asdict(
            log, value_serializer=lambda _i, _a, v: str(v) if isinstance(v, Path) else v
        ),
        "measures": figures,
    }


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=2, metavar=("MEASURE", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--dry", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--dsh", type=int, nargs="*", default=[100_000])
    parser.add_argument("--compaction", type=int, nargs="*", default=[100_000])
    parser.add_argument("--replacements", type=int, nargs="+", default=[950])
    parser.add_argument("--adversarial", type=int, nargs="*", default=[1000, 8000])
    parser.add_argument("--measures", nargs="+", choices=[m.name for m in MEASURES], default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per worker")
    parser.add_argument("--verify", action="store_true", help="admit each log before writing")
    parser.add_argument("--workdir", type=Path, help="keep the log files here")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = _arguments(argv)
    if args.worker:
        measure, file = args.worker
        _DRY[0] = args.dry
        work(measure, Path(file), args.repeat)
        return
    # On SIGTERM unwind as on Ctrl-C: the running worker is killed, the scratch directory removed.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    measures = [m for m in MEASURES if args.measures is None or m.name in args.measures]
    started = datetime.datetime.now(datetime.UTC)
    print(
        f"{started:%Y-%m-%d %H:%M} UTC, CPython {platform.python_version()}, "
        f"{os.cpu_count()} cores; best of {args.repeat}, {args.timeout:g} s per worker\n"
        f"kernel: {_kernel_source()}"
    )
    reports = []
    with tempfile.TemporaryDirectory(prefix="lean-bench-") as scratch:
        directory = args.workdir or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        for name, build in _log_builders(args):
            log = prepare(name, build(), directory, verify=args.verify)
            reports.append(_report(log, measure_log(log, measures, args)))
    if args.json:
        document = {
            "started": started.isoformat(),
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "kernel": _kernel_source(),
            "repeat": args.repeat,
            "timeout": args.timeout,
            "logs": reports,
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
