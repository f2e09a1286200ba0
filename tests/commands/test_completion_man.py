"""Shell completion (shtab) and the manual page, both generated from the command's own parser:
the bash script parses and completes in a real bash, the page renders with groff/man."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from controller.commands.cli import build_parser
from controller.commands.manpage import escape, installed_paths


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=60)


def top_level_commands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.choices and a.dest == "command")
    return list(action.choices)


def complete(script: str, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one being typed), with the real script."""
    line = " ".join(words)
    program = (f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; '
               f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; _shtab_pokdeng_table; '
               f'printf "%s\\n" "${{COMPREPLY[@]}}"')
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return [word for word in result.stdout.split("\n") if word]


def test_bash_completion_parses_and_completes_commands_and_choices() -> None:
    result = cli("completion", "bash")
    assert result.returncode == 0, result.stderr
    script = result.stdout
    assert subprocess.run(["bash", "-n"], input=script, text=True, timeout=30).returncode == 0
    assert complete(script, "pokdeng-table", "sup") == ["supervisor"]
    assert complete(script, "pokdeng-table", "supervisor", "re") == ["resume", "reveal"]
    assert set(complete(script, "pokdeng-table", "")) >= set(top_level_commands())
    assert "--verify" in complete(script, "pokdeng-table", "version", "--")


def test_zsh_completion_is_a_compdef_for_every_command() -> None:
    result = cli("completion", "zsh")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("#compdef pokdeng-table")
    for command in top_level_commands():
        function = "_shtab_pokdeng_table_" + command.replace("-", "_")
        assert function in result.stdout, command
    if shutil.which("zsh"):
        check = subprocess.run(["zsh", "-n"], input=result.stdout, text=True, timeout=30)
        assert check.returncode == 0


def test_an_unknown_shell_is_refused() -> None:
    result = cli("completion", "fish")
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_escape_keeps_roff_requests_and_unicode_out() -> None:
    assert escape(".TH x") == "\\&.TH x"
    assert escape("a-b \\ c") == "a\\-b \\e c"
    assert escape("9♦ — ok") == "9\\[u2666] \\[u2014] ok"


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed")
def test_the_manual_page_renders_without_warnings_and_has_every_command(tmp_path) -> None:
    result = cli("man")
    assert result.returncode == 0, result.stderr
    page = tmp_path / "pokdeng-table.1"
    page.write_text(result.stdout)
    assert result.stdout.isascii()
    strict = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)],
                            capture_output=True, text=True, timeout=60)
    assert strict.returncode == 0 and strict.stderr == ""
    rendered = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", str(page)],
                              capture_output=True, text=True, timeout=60).stdout
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS", "FILES"):
        assert f"\n{heading}\n" in rendered, heading
    for command in top_level_commands():
        assert f"pokdeng-table {command}" in rendered, command
    assert "pokdeng-table journal verify" in rendered  # nested commands too
    assert "--verify" in rendered and "re-hash the installed files" in rendered
    if shutil.which("man"):
        shown = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                               timeout=60, env={"MANPAGER": "cat", "PATH": "/usr/bin:/bin",
                                                "LANG": "C.UTF-8",
                                                "MANWIDTH": "100"})
        assert shown.returncode == 0 and "POKDENG-TABLE(1)" in shown.stdout
        assert shown.stderr == ""


def test_the_manual_names_the_documents_where_the_package_installs_them() -> None:
    assert installed_paths("see docs/install.md, docs/health.schema.json and "
                           "config/example.yaml; not mydocs/x.md") == (
        "see /usr/share/doc/pokdeng-table/install.md, "
        "/usr/share/doc/pokdeng-table/health.schema.json and "
        "/etc/pokdeng-table/example.yaml; not mydocs/x.md")
    page = cli("man").stdout
    assert "docs/install.md" not in page.replace("/usr/share/doc/pokdeng\\-table/", "")
    assert "/usr/share/doc/pokdeng\\-table/install.md" in page


def test_an_option_with_one_metavar_per_value_is_listed_with_each() -> None:
    """argparse lets ``metavar`` be a tuple (one name per value of ``nargs``): the page names
    each (it used to raise TypeError joining the tuple to a string)."""
    import argparse

    from controller.commands.manpage import _options

    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--seat", nargs=2, metavar=("SEAT", "CARD"), help="a seat and a card")
    parser.add_argument("--speed", help="how fast")
    lines = _options(parser)
    assert "\\fB\\-\\-seat SEAT CARD\\fR" in lines
    assert "\\fB\\-\\-speed SPEED\\fR" in lines
