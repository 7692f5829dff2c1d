"""Values: lossless frozen JSON, the event model, path text (docs/format/events.md §1-§3)."""

__all__: tuple[str, ...] = ()
