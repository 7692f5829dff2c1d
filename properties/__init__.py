"""Hypothesis strategies, laws and a state machine for session-kernel logs: the research kit.

Reusable by any test suite (see docs/properties.md): `properties.strategies`
(the generators), `properties.laws` (the catalog P1-P45 as plain functions),
`properties.machine` (a `SessionLog` state machine), `properties.exhaustive`
(every crash prefix of a bounded family), `properties.profiles` (registered,
never loaded), `properties.types` (`st.from_type` for the kernel's types, through
Hypothesis's entry point) and `properties.pytest_plugin` (store fixtures and
`--session-kernel-profile`). Importing this package imports nothing else.
"""

__all__: tuple[str, ...] = ()
