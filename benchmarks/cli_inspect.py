"""`session-kernel inspect` of a large log: the summary tables against `--json`.

    python3 benchmarks/cli_inspect.py                 # realistic 100k-event log, best of 5
    python3 benchmarks/cli_inspect.py --events 300000 --repeat 3

Builds a realistic log (`realistic.realistic_log`, seeded) of `--events` events,
writes it with `write_jsonl` into a temporary directory, then times whole
command runs in fresh interpreters (`python -m kernel.cli inspect ...`, output
to a file, so no pager and no progress): the default summary, `--json`,
`--jsonl` and `--all` (every section, as `inspect` printed before the summary).
Prints the best wall time of each, its lines of output, and the summary's time
as a multiple of `--json`'s. The target is a summary within 1.5 times `--json`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

VARIANTS = (
    ("summary", ()),
    ("--json", ("--json",)),
    ("--jsonl", ("--jsonl",)),
    ("--all", ("--all",)),
)


def build(events: int, directory: Path) -> Path:
    """Write a realistic log of at least `events` events; returns its path."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    from realistic import realistic_log

    from kernel import SessionHeader, event_from_json, write_jsonl

    wire = realistic_log(events, events)
    header = SessionHeader(id="bench", created_at=1_760_000_000_000, cwd="/bench")
    path = directory / f"realistic-{events}.jsonl"
    path.write_bytes(write_jsonl(header, [event_from_json(w) for w in wire]))
    return path


def timed(log: Path, flags: tuple[str, ...], out: Path) -> tuple[float, int]:
    """One run's wall time and the lines it printed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "kernel.cli", "inspect", *flags, str(log)]
    with out.open("wb") as sink:
        start = time.perf_counter()
        subprocess.run(command, stdout=sink, stderr=subprocess.DEVNULL, env=env, check=True)
        seconds = time.perf_counter() - start
    return seconds, out.read_bytes().count(b"\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        log = build(args.events, directory)
        size = log.stat().st_size
        print(f"log: {args.events:,} events requested, {size / 1e6:.1f} MB ({log.name})")
        best: dict[str, float] = {}
        for name, flags in VARIANTS:
            runs = [timed(log, flags, directory / "out") for _ in range(args.repeat)]
            best[name] = min(seconds for seconds, _ in runs)
            lines = runs[0][1]
            print(f"{name:>8}: best {best[name]:.3f} s of {args.repeat}, {lines:,} lines")
        ratio = best["summary"] / best["--json"]
        verdict = "within" if ratio < 1.5 else "NOT within"
        print(f"summary / --json = {ratio:.2f} ({verdict} the 1.5x target)")


if __name__ == "__main__":
    main()
