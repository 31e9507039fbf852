"""`CKPTLOG_*` environment variables that name no setting: a typo is an error, as in a config file.

pydantic-settings reads `CKPTLOG_<SETTING>` for every field of `ServiceSettings` and ignores every
other variable with the prefix, so `CKPTLOG_SNAPSHOT_EVRY=100` used to be dropped without a word
while `snapshot_evry = 100` in a `--config` file is refused. `unknown_variables` lists the
variables that are neither a setting nor one of the few ckptlog reads elsewhere, nor a test knob.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

PREFIX = "CKPTLOG_"
NOT_SETTINGS = frozenset(
    {
        "CKPTLOG_HOME",  # the local broker's and the default snapshots' directory (ckptlog.kafka.discovery)
        "CKPTLOG_CACHE",  # the Kafka jar cache (ckptlog.broker.jars)
        "CKPTLOG_CRASH_AT",  # the reliability suite's crash points (ckptlog.processor.failpoints)
        "CKPTLOG_EVAL_FN",  # deploy/docker-compose.yml: the evaluator's --fn
        "CKPTLOG_EVAL_DIR",  # deploy/docker-compose.yml: the evaluator's module directory
        "CKPTLOG_UI_TOKEN",  # `ckptlog ui --token`'s default (ckptlog.cli.ui)
        "CKPTLOG_PURE",  # setup.py: build the pure Python fold (no mypyc); the tests then import the sources
    }
)
"""Variables ckptlog itself reads outside the settings (the code or the deploy files): no test knob."""
TEST_PREFIX = "CKPTLOG_TEST_"
"""The prefix of the test suite's knobs (`CKPTLOG_TEST_SAFETY_EXAMPLES`, ...): ignored, so a processor a
test starts with a knob set still runs, and production code names no test knob."""


def unknown_variables(environ: Mapping[str, str], settings: Iterable[str]) -> list[str]:
    """`CKPTLOG_*` names in `environ` that are no setting (case-insensitive, as pydantic-settings reads them)."""
    known = {PREFIX + name.upper() for name in settings} | NOT_SETTINGS
    return sorted(
        name
        for name in environ
        if name.upper().startswith(PREFIX) and name.upper() not in known and not name.upper().startswith(TEST_PREFIX)
    )


def unknown_message(names: list[str], settings: Iterable[str]) -> str:
    """`CKPTLOG_SNAPSHOT_EVRY is not a setting (did you mean CKPTLOG_SNAPSHOT_EVERY?)`, with the fix."""
    candidates = [PREFIX + name.upper() for name in settings]
    described = []
    for name in names:
        close = difflib.get_close_matches(name.upper(), candidates, n=1)
        described.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return (
        f"unknown environment variable{'s' if len(names) > 1 else ''} {', '.join(described)}: no ckptlog "
        "setting has that name; fix the spelling or unset it (docs/processor.md, Settings)"
    )
