"""The wire: events and headers as JSON objects, JSON text, packed chunk rows, older v0 shapes."""

__all__: tuple[str, ...] = ()
