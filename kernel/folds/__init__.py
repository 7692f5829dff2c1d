"""Folds over admitted events (docs/format/folds.md): surface, messages, headers, closers."""

__all__: tuple[str, ...] = ()
