"""Request and response shapes: the Pulsar JSON models, the response-only shapes and the typed
path and query parameters."""
