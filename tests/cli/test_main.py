"""The dispatcher: ``--help`` lists every subcommand without importing any, a subcommand imports only
its own module, and the quick commands (``--help``, ``sweep status``) never load torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from initmem.cli import SUBCOMMANDS, main

STARTUP = """
import sys
from initmem.cli import main
for argv in (["--help"], ["sweep", "status", sys.argv[1]]):
    try:
        code = main(argv)
    except SystemExit as exit:  # --help exits
        code = exit.code
    assert code == 0, (argv, code)
loaded = [m for m in sys.modules if m.startswith("initmem.cli.")]
print(sorted(loaded), sorted(m for m in ("torch", "pandas", "initmem.empirical.trainer") if m in sys.modules))
"""


def test_help_and_sweep_status_start_without_torch(tmp_path):
    from initmem.empirical.sweep import SweepSpec, prepare_sweep, preset_text

    prepare_sweep(SweepSpec.from_toml(preset_text("demo")), tmp_path / "demo")
    done = subprocess.run(
        [sys.executable, "-c", STARTUP, str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *printed, last = done.stdout.strip().splitlines()
    assert last == "['initmem.cli.sweep'] []"
    assert all(name in "\n".join(printed) for name in SUBCOMMANDS)  # listed by --help
    assert "24 runs" in "\n".join(printed) and "pending   24" in "\n".join(printed)


def test_a_subcommand_gets_its_own_parser_and_a_typo_is_refused(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["sweep", "--help"])
    assert exit.value.code == 0
    assert "status" in capsys.readouterr().out  # the sweep module's own actions
    with pytest.raises(SystemExit) as exit:
        main(["sweeep", "status", "x"])
    assert exit.value.code == 2
    assert "invalid choice: 'sweeep'" in capsys.readouterr().err
    assert main([]) == 2
