"""The one gate to aiokafka's private attributes (issue 25, item 3).

The producers' fast path appends records straight into the compiled record builder inside aiokafka's
`BatchBuilder` and sets the batch's record count itself (`_builder.append`, `_relative_offset`); a
few best-effort helpers read `_txn_manager`, `_message_accumulator` and the sender, and `TopicTail`
(ckptlog/kafka/clients_io.py) asks its consumer's `_client` for fresh metadata (an admin client's
`describe_topics` otherwise). Those names are not aiokafka's API: they were read against one
aiokafka version, `WRITTEN_FOR`, and are used only when that version is installed. With any other
version, or with `aiokafka_internals = "off"` (`CKPTLOG_AIOKAFKA_INTERNALS=off`,
`--aiokafka-internals off`), every caller takes aiokafka's public API instead (`create_batch`,
`BatchBuilder.append`, `send_batch`, `stop`): the same records, slower. So an aiokafka upgrade costs
speed, never correctness."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

log = logging.getLogger(__name__)

Internals = Literal["auto", "off"]
WRITTEN_FOR = "0.14.0"
"""The aiokafka version whose private attributes the fast path was written against."""

_warned: set[str] = set()


def installed() -> str:
    """The installed aiokafka's version ("unknown" when its metadata cannot be read)."""
    try:
        return version("aiokafka")
    except PackageNotFoundError:
        return "unknown"


def use_internals(mode: Internals = "auto", found: str | None = None) -> bool:
    """Whether a client may use aiokafka's private attributes: `mode` "auto" and the installed aiokafka
    (`found`: the version to judge instead) being the version they were written for."""
    if mode == "off":
        return False
    found = installed() if found is None else found
    if found == WRITTEN_FOR:
        return True
    if found not in _warned:
        _warned.add(found)
        log.warning(
            "event=aiokafka_public_path aiokafka=%s written_for=%s: ckptlog's producers append into aiokafka's "
            "private batch builders only on the aiokafka version that code was written for; with aiokafka %s "
            "they fall back to aiokafka's public API (create_batch, append, send_batch): the same records, "
            "correct, slower (more CPU per published record). Install aiokafka==%s for the fast path, or set "
            "CKPTLOG_AIOKAFKA_INTERNALS=off to choose the public path and silence this warning",
            found,
            WRITTEN_FOR,
            found,
            WRITTEN_FOR,
        )
    return False
