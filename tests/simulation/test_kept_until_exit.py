"""The console entry point leaves a replay's objects to the operating system
(it ends with os._exit); main() called in-process keeps nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import SAMPLE

from pt2chakra.cli import main, options


def test_main_in_process_keeps_nothing(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "_KEPT_UNTIL_EXIT", None)
    et = tmp_path / "s.et"
    assert main(["convert", "--host-trace", f"{SAMPLE}.host_et.json.gz", "-o", str(et)]) == 0
    assert main(["simulate", "--quiet", str(et)]) == 0
    assert options._KEPT_UNTIL_EXIT is None


def test_kept_once_exiting_without_freeing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "_KEPT_UNTIL_EXIT", None)
    options.keep_until_exit("a")
    assert options._KEPT_UNTIL_EXIT is None
    options.exiting_without_freeing()
    options.keep_until_exit("b")
    assert options._KEPT_UNTIL_EXIT == ["b"]


def test_console_entry_point_still_prints_and_exits(tmp_path) -> None:
    et = tmp_path / "s.et"
    subprocess.run([sys.executable, "-m", "pt2chakra", "convert", "--host-trace",
                    f"{SAMPLE}.host_et.json.gz", "-o", str(et)], check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "pt2chakra", "simulate", "--json", str(et)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and '"predicted_step_us"' in done.stdout
