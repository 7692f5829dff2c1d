"""Hypothesis strategies, laws and a state machine for session-kernel logs.

Reusable by any test suite (see docs/properties.md): `properties.strategies`
(the generators), `properties.laws` (the catalog P1-P45 as plain functions),
`properties.machine` (a `SessionLog` state machine), `properties.exhaustive`
(every crash prefix of a bounded family) and `properties.profiles`.
"""

__all__: tuple[str, ...] = ()
