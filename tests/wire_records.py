"""Hand-spelled wire records for the scan tests (docs/format/persistence.md §3.3 notation), without
newline."""

from __future__ import annotations

__all__ = ("T", "E", "S")


def T(seq: int, turn: int = 1) -> bytes:
    """`turn/start` at `seq`."""
    return b'{"type":"turn/start","seq":%d,"time":%d,"data":{"turn":%d}}' % (seq, seq, turn)


def E(seq: int, turn: int = 1) -> bytes:
    """`turn/end` (completed) at `seq`."""
    return (
        b'{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"completed"}}}'
        % (seq, seq, turn)
    )


def S(seq: int) -> bytes:
    """`step/start` of turn 1, step 1 at `seq`."""
    return b'{"type":"step/start","seq":%d,"time":%d,"data":{"turn":1,"step":1}}' % (seq, seq)
