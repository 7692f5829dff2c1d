"""Hypothesis strategies, laws and a state machine for session-kernel logs: the research kit.

The public modules (docs/properties.md, docs/api/properties.md): `properties.strategies`
(the generators and the values they draw), `properties.laws` (the catalog P1-P45 as plain
functions), `properties.machine` (a `SessionLog` state machine), `properties.exhaustive`
(every crash prefix of a bounded family), `properties.profiles` (settings profiles,
registered, never loaded) and `properties.pytest_plugin` (store fixtures and
`--session-kernel-profile`). Every other module is internal: a leading underscore, or
`properties.types`, which the `hypothesis` entry point names. Importing this package
imports nothing else.
"""

__all__: tuple[str, ...] = ()
