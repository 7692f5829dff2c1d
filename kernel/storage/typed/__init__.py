"""The typed load path: stored lines decoded and checked in C by msgspec structs."""

__all__: tuple[str, ...] = ()
