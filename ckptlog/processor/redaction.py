"""Masking secrets in text: what every log line and every line the CLI writes to stderr passes
through (ckptlog/processor/service/logs.py, ckptlog/cli/errors.py). Light on purpose: the CLI imports it
for every command.

`redact` masks URL credentials (`scheme://user:***@`), the values of secret-looking keys
(`password=`, `'secret': ...`, `token`, `api_key`, ...) and every literal value registered with
`register_secrets` (the SASL password, fsspec storage options' keys and secrets). A registered
secret of `ANYWHERE_FROM` characters or more is masked wherever it appears; a shorter one (a
2-character password would otherwise mask ordinary words) wherever it stands as a whole value:
after `=` or `:`, between quotes, or as a URL's user or password.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
_URL_CREDENTIALS = re.compile(r"(://[^/\s:@'\"]+):[^/\s@'\"]+@")
_SECRET_VALUE = re.compile(
    r"(?i)((?:password|passwd|secret|token|credential|api_?key|access_?key|private_?key)\w*"
    r"['\"]?\s*[:=]\s*['\"]?)([^'\"\s,;}]+)"
)
ANYWHERE_FROM = 4
"""Registered secrets at least this long are masked wherever they appear; shorter ones only where
they stand as a whole value."""

_secrets: set[str] = set()  # masked anywhere
_short_secrets: set[str] = set()  # masked as whole values
_short: re.Pattern[str] | None = None  # the registered secrets shorter than ANYWHERE_FROM, as whole values


def redact(text: str) -> str:
    """`text` without credentials: URL passwords, secret-looking `key=value`s, registered secrets."""
    text = _URL_CREDENTIALS.sub(rf"\1:{MASK}@", text)
    text = _SECRET_VALUE.sub(rf"\1{MASK}", text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if _short is not None:
        text = _short.sub(rf"\g<pre>{MASK}", text)
    return text


def _whole_values(secrets: Iterable[str]) -> re.Pattern[str] | None:
    """Where a short secret stands as a value: after `=` or `:` (spaces and a quote may follow), after
    a quote that starts a word, or as a URL's user (`://pw@`, `://pw:`) or password (`:pw@`); and
    only when nothing but a quote, a space, a separator or the end follows."""
    alternatives = "|".join(re.escape(s) for s in sorted(secrets, key=len, reverse=True))
    if not alternatives:
        return None
    before = r"(?P<pre>[=:]\s*['\"]?|(?<!\w)['\"]|://)"
    after = r"(?=['\"\s,;:)\]}&@/]|$)"
    return re.compile(f"{before}(?:{alternatives}){after}")


def register_secrets(secrets: Iterable[str]) -> None:
    """Mask these values in every line from now on: those of `ANYWHERE_FROM` characters or more
    wherever they appear, shorter ones wherever they stand as a whole value (see the module doc)."""
    global _short
    for secret in secrets:
        if secret:
            (_secrets if len(secret) >= ANYWHERE_FROM else _short_secrets).add(secret)
    _short = _whole_values(_short_secrets)


def clear_secrets() -> None:
    """Forget every registered secret (tests)."""
    global _short
    _secrets.clear()
    _short_secrets.clear()
    _short = None
