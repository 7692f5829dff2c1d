"""Storage layouts (docs/format/persistence.md): bytes and rows in, admitted events out."""

__all__: tuple[str, ...] = ()
