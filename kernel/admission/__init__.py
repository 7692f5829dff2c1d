"""Admission: the rules an event, a header and a log must pass (docs/format/admission.md).

`envelope` (R2, R5/R6), `provenance` (R7), `payloads` (R3, R10-R12),
`header` (H1-H12) and `admit` (R14, the seed/restore pipeline of one event).
"""
