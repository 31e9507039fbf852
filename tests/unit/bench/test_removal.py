"""bench.removal: a round deletes every checkpoint it made, and the strace count reads between its marks."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.removal import MARK, one_round, print_syscalls


def test_a_round_deletes_every_checkpoint_and_times_it() -> None:
    wall, user, system = one_round(40, 7, setup_only=False, leave=False)
    assert wall > 0 and user >= 0 and system >= 0


def test_the_syscall_count_is_per_checkpoint_between_the_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "s.log"
    log.write_text(
        "\n".join(
            [
                '1 openat(AT_FDCWD, "x", O_RDONLY) = 3',
                f'1 newfstatat(AT_FDCWD, "{MARK}start", 0x1, AT_SYMLINK_NOFOLLOW) = -1 ENOENT',
                '1 openat(9, "ckpt-1", O_RDONLY|O_NOFOLLOW) = 3',
                '2 unlinkat(3, "model.bin", 0 <unfinished ...>',
                "1 close(3) = 0",
                "2 <... unlinkat resumed>) = 0",
                "1 --- SIGCHLD {si_signo=SIGCHLD} ---",
                '1 unlinkat(9, "ckpt-1", AT_REMOVEDIR) = 0',
                f'1 newfstatat(AT_FDCWD, "{MARK}end", 0x1, AT_SYMLINK_NOFOLLOW) = -1 ENOENT',
                "1 close(4) = 0",
            ]
        )
    )
    print_syscalls(log, 2)
    out = capsys.readouterr().out
    assert out.startswith("2.00 system calls per deleted checkpoint (4 for 2)")
    assert "unlinkat       1.00" in out and "openat         0.50" in out and "close          0.50" in out
