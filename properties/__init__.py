"""Hypothesis strategies, laws and a state machine for session-kernel logs.

Reusable by any test suite: see docs/properties.md.
"""

__all__: tuple[str, ...] = ()
