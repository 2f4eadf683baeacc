"""`pulsar-admin`, a pure HTTP client of the admin REST API (imports nothing from the
service packages). Entry point: `cli.main:run`."""

__all__: list[str] = []
