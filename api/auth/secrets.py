"""Sensitive configuration never leaves the process: masked in the runtime-configuration
answer and in every log line.

Pulsar's rule for what is sensitive: a key naming a token, a secret, a password or
authentication parameters (`tokenSecretKey`, `brokerClientAuthenticationParameters`,
`bookkeeperClientAuthenticationParameters`, `authParams`, `...Password`). Log lines are also
cut to `MAX_LOG_MESSAGE` characters, so no line carries a whole document or request body.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

MASK = "******"
MAX_LOG_MESSAGE = 1000
_SENSITIVE_WORDS = r"token|secret|password|auth(entication)?param|authorization"
_SENSITIVE = re.compile(_SENSITIVE_WORDS, re.IGNORECASE)
# The same test on ASCII text once lowered: five times cheaper than the case-blind search.
_SENSITIVE_LOWERED = re.compile(_SENSITIVE_WORDS)
# `key=value`, `key: value`, `"key": "value"`; the key is judged by `is_sensitive`. A key
# starts only where no key character precedes it and every quantifier is possessive, so a
# line is scanned in linear time (a 30,000-character path of word characters must not cost
# a quadratic backtrack in a log call on the event loop).
_PAIR = re.compile(
    r"""(?<![\w.-])(?P<key>["']?[\w.-]++["']?)(?P<sep>\s*+[=:]\s*+)"""
    r"""(?P<value>"[^"]*+"|'[^']*+'|(?:Bearer|Basic)\s++[^\s,;}&]++|[^\s,;}&]++)"""
)


def is_sensitive(key: str) -> bool:
    return _SENSITIVE.search(key) is not None


def masked_config(values: Mapping[str, str]) -> dict[str, str]:
    """`values` with every sensitive key's value replaced by `MASK` (empty values stay)."""
    return {key: MASK if value and is_sensitive(key) else value for key, value in values.items()}


def mask_text(text: str) -> str:
    """Sensitive `key=value` pairs in free text masked, the text cut to `MAX_LOG_MESSAGE`
    (cut first, so masking never scans more than that)."""
    extra = len(text) - MAX_LOG_MESSAGE
    head = text[:MAX_LOG_MESSAGE] if extra > 0 else text
    # A sensitive key is a part of the text: without a sensitive word there is none to mask.
    masked = _PAIR.sub(_mask_pair, head) if _has_sensitive_word(head) else head
    return f"{masked}... ({extra} more chars)" if extra > 0 else masked


def _has_sensitive_word(text: str) -> bool:
    if text.isascii():  # lowered, ASCII text is what the case-blind pattern matches
        return _SENSITIVE_LOWERED.search(text.lower()) is not None
    return _SENSITIVE.search(text) is not None


def _mask_pair(match: re.Match[str]) -> str:
    if not is_sensitive(match.group("key")):
        return match.group(0)
    return f"{match.group('key')}{match.group('sep')}{MASK}"


class _MaskedRecord(logging.LogRecord):
    def getMessage(self) -> str:
        return mask_text(super().getMessage())


_installed = False


def install_log_masking() -> None:
    """Every log record of the process, whatever logger or handler, masked and cut."""
    global _installed
    if _installed:
        return
    previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record.__class__ = _MaskedRecord
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
