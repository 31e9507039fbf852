"""What a demo leaves behind so its runs can be explored, and how the next demo clears it.

A demo keeps its topics and files (`ckptlog inspect`, `watch`, `history` and `explain` need the
topics; `inspect --as-of` the snapshots) and writes the settings that find them to
`<workdir>/ckptlog.toml`, a `--config` file every command takes. The next demo on the same
`CKPTLOG_HOME` removes them first, so at most one demo's leftovers exist; `ckptlog demo --clean`
removes its own at the end instead. Only what a demo recorded is removed: topics with its
`ckptlog-demo-` prefix, and a directory whose name starts with `ckptlog-demo-` and still holds
the marker file this module wrote there.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import astuple, dataclass
from pathlib import Path

from ckptlog.kafka.discovery import ckptlog_home
from ckptlog.processor.service.records import TopicNames
from ckptlog.processor.service.settings import ServiceSettings

log = logging.getLogger(__name__)

CONFIG_NAME = "ckptlog.toml"
PREFIX = "ckptlog-demo-"
_KEYS = (
    "bootstrap_servers",
    "group_id",
    "input_topic",
    "checkpoints_topic",
    "validations_topic",
    "watermarks_topic",
    "state_topic",
    "dlq_topic",
    "storage_root",
    "snapshots",
)


@dataclass(frozen=True, slots=True)
class Leftovers:
    """One demo's topics and directory, as recorded in `$CKPTLOG_HOME/last-demo.json`."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    workdir: Path

    @staticmethod
    def of(settings: ServiceSettings, workdir: Path) -> Leftovers:
        names = astuple(TopicNames.of(settings))
        return Leftovers(settings.bootstrap_servers or "", names, workdir)


def record_path() -> Path:
    return ckptlog_home() / "last-demo.json"


def write_config(settings: ServiceSettings, workdir: Path) -> Path:
    """`<workdir>/ckptlog.toml`: the demo's broker, topics and storage, for `--config`."""
    values = settings.model_dump()
    lines = ["# the settings of a `ckptlog demo`: pass this file to any command with --config"]
    lines += [f"{key} = {json.dumps(values[key])}" for key in _KEYS if values.get(key) is not None]
    path = workdir / CONFIG_NAME
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def remember(leftovers: Leftovers) -> None:
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"bootstrap_servers": leftovers.bootstrap_servers, "topics": list(leftovers.topics)}
    path.write_text(json.dumps({**body, "workdir": str(leftovers.workdir)}), encoding="utf-8")


def recalled() -> Leftovers | None:
    """The last demo's leftovers; None when there are none or the record is unreadable."""
    try:
        body = json.loads(record_path().read_text(encoding="utf-8"))
        topics = tuple(str(t) for t in body["topics"])
        return Leftovers(str(body["bootstrap_servers"]), topics, Path(str(body["workdir"])))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def forget() -> None:
    record_path().unlink(missing_ok=True)


def demo_topics(leftovers: Leftovers, bootstrap: str) -> list[str]:
    """The recorded topics a demo may delete: on this broker, and named as a demo names them."""
    if leftovers.bootstrap_servers != bootstrap:
        return []
    return [t for t in leftovers.topics if t.startswith(PREFIX)]


def remove_workdir(workdir: Path) -> bool:
    """rmtree a demo's directory, only when it still looks exactly like one (never a symlink)."""
    if workdir.is_symlink() or not workdir.is_dir() or not workdir.name.startswith(PREFIX):
        log.warning("event=demo_leftovers_kept path=%s reason=not_a_demo_directory", workdir)
        return False
    marker = workdir / CONFIG_NAME
    if marker.is_symlink() or not marker.is_file():
        log.warning("event=demo_leftovers_kept path=%s reason=no_marker", workdir)
        return False
    shutil.rmtree(workdir, ignore_errors=True)
    return True


def clear_files(last: Leftovers, current: Path) -> None:
    """The last demo's directory (unless it is the current one) and its record."""
    if last.workdir.resolve() != current.resolve():
        remove_workdir(last.workdir)
    forget()
