"""ASGI layers in front of FastAPI: the request rules (methods, media types, body limits), the
write rate limit, the request deadline, the encoded-slash rule and the rack-write hot path."""
