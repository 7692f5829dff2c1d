"""Instructions executed by one lean measure, counted by callgrind: a figure that does not move.

    python3 benchmarks/instructions.py LOG.jsonl fold_request_header tool_pairing_cuts
    python3 benchmarks/instructions.py LOG.jsonl check_invariants --repeat 1 --valgrind valgrind

Wall-clock ratios on a shared machine move by half between runs; the instruction
count of one program moves by a few percent at most. For each measure this runs
the lean worker (`benchmarks/lean.py --worker MEASURE LOG`) twice under
`valgrind --tool=callgrind`, once as it is and once with `--dry` (the same
set-up, the load included, without the measured work), each in its own process
with the same string-hash seed, and prints the difference in millions of
instructions. The log is a file `lean.py` writes (`--workdir` keeps them).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Final

__all__ = ("instructions", "main")

_LEAN: Final = Path(__file__).resolve().parent / "lean.py"
_TOTALS: Final = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def instructions(
    measure: str, log: Path, *, dry: bool, repeat: int = 1, valgrind: str = "valgrind"
) -> int:
    """Instructions executed by one lean worker run of `measure` on `log` (`dry`: set-up only)."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as scratch:
        out = Path(scratch) / "callgrind.out"
        command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}"]
        command += [sys.executable, str(_LEAN), "--worker", measure, str(log)]
        command += ["--repeat", str(repeat)] + (["--dry"] if dry else [])
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(command, env=env, check=True, capture_output=True)
        found = _TOTALS.search(out.read_bytes())
    if found is None:
        raise SystemExit(f"no instruction total in callgrind's output for {measure}")
    return int(found.group(1))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("log", type=Path, help="a JSONL log written by lean.py")
    parser.add_argument("measures", nargs="+", help="lean.py measure names")
    parser.add_argument("--repeat", type=int, default=1, help="measured runs per worker")
    parser.add_argument("--valgrind", default="valgrind")
    args = parser.parse_args(argv)
    print(f"{args.log.name}: millions of instructions per run of the measured work")
    count = partial(instructions, log=args.log, repeat=args.repeat, valgrind=args.valgrind)
    for measure in args.measures:
        full, setup = count(measure, dry=False), count(measure, dry=True)
        per_run = (full - setup) / args.repeat / 1e6
        print(f"  {measure:<28}{per_run:>10.2f} M  (set-up {setup / 1e6:.0f} M)", flush=True)


if __name__ == "__main__":
    main()
