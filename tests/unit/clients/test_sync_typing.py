"""The sync clients' methods are derived from the async ones (ckptlog.client.loop_thread.twin,
issue 40 item 3): mypy --strict must still type a user's calls of them, keyword by keyword."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy import api

USER_CODE = textwrap.dedent(
    """
    from ckptlog import Reader, Reporter

    def train(reporter: Reporter, reader: Reader) -> None:
        reveal_type(reporter.report)
        sent = reporter.report({"loss": 0.1}, "/runs/a/c1", confirm=True)
        reveal_type(sent)
        reporter.run_started("/runs/a", 3, keep_every_n_steps=5, step_attribute="step")
        reveal_type(reader.get_all_reported_checkpoints("a", 1, timeout_s=5))
        reporter.report(0.1)  # E: the metrics are a mapping
        reporter.run_started("/runs/a", keep_evry_n_steps=5)  # E: no such keyword
        reporter.run_started("/runs/a", keep_time_interval_s="1h")  # E: a float
        reader.wait_for("a", "1")  # E: the report index is an int
    """
)


def test_mypy_types_calls_of_the_derived_sync_methods(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(USER_CODE)
    out, _, status = api.run(
        ["--strict", "--no-incremental", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         str(tmp_path / "user.py")]
    )  # fmt: skip
    lines = out.splitlines()
    revealed = [line.split("Revealed type is ", 1)[1] for line in lines if "Revealed type is" in line]
    assert revealed[0].startswith('"def (metrics: typing.Mapping[str, Any], checkpoint_path:'), revealed
    assert "*, index: int | None =, event_id: str | None =, confirm: bool | None =)" in revealed[0]
    assert revealed[0].endswith('-> ckptlog.client.reporter.SentEvent"')
    assert revealed[1] == '"ckptlog.client.reporter.SentEvent"'
    assert revealed[2] == '"list[ckptlog.events.view.ReportedCheckpoint]"', revealed
    errors = [line for line in lines if ": error:" in line]
    wanted = [str(i + 1) for i, line in enumerate(USER_CODE.splitlines()) if "# E:" in line]
    assert [line.split(":")[1] for line in errors] == wanted, out
    assert status == 1
