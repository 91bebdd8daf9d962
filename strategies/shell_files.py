"""Files a shell command reads and writes, for the summaries' file tracking.

Agents run shell tools as much as file tools (Codex's ``local_shell_call`` and ``shell_call``,
Claude Code's ``Bash``). A command line is split with ``shlex`` and each pipeline stage read by
its verb: ``cat``, ``head``, ``tail``, ``less``, ``nl``, ``wc`` read their file arguments;
``grep``/``rg`` read theirs after the pattern; ``sed`` reads after its script, or modifies with
``-i``; ``tee``, ``touch`` and a ``>``/``>>`` redirection modify. Anything else is left alone:
a guess that misses is better than a file list that lies.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "wc", "bat"})
SEARCHERS = frozenset({"grep", "rg", "egrep", "fgrep"})
SEPARATORS = frozenset({"|", "||", "&&", ";", "&"})
SHELLS = frozenset({"bash", "sh", "zsh"})


def shell_files(command: str | Iterable[str]) -> tuple[set[str], set[str]]:
    """(files read, files modified) by ``command``, a command line or an argv."""
    words = _words(command)
    read: set[str] = set()
    modified: set[str] = set()
    for stage in _stages(words):
        _stage(stage, read, modified)
    return read, modified


def _words(command: str | Iterable[str]) -> list[str]:
    if not isinstance(command, str):
        argv = [str(w) for w in command]
        # ["bash", "-lc", "cat x"]: the script is the command line.
        if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in SHELLS and argv[1].startswith("-"):
            return _words(argv[2])
        return argv
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # an unbalanced quote: not a command we can read
        return []


def _stages(words: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for w in words:
        if w in SEPARATORS:
            out.append([])
        else:
            out[-1].append(w)
    return [s for s in out if s]


def _stage(words: list[str], read: set[str], modified: set[str]) -> None:
    args: list[str] = []
    i = 0
    while i < len(words):  # redirections first: "> file", ">> file", "< file"
        w = words[i]
        if w in (">", ">>") and i + 1 < len(words):
            modified.add(words[i + 1])
            i += 2
        elif w == "<" and i + 1 < len(words):
            read.add(words[i + 1])
            i += 2
        else:
            args.append(w)
            i += 1
    if not args:
        return
    verb, rest = args[0].rsplit("/", 1)[-1], args[1:]
    files = [a for a in rest if not a.startswith("-")]
    if verb in READERS:
        read.update(f for f in files if not f.isdigit())
    elif verb in SEARCHERS and len(files) > 1:
        read.update(files[1:])
    elif verb == "sed" and files:
        in_place = any(a == "-i" or a.startswith("-i") for a in rest)
        (modified if in_place else read).update(files[1:])
    elif verb in ("tee", "touch"):
        modified.update(files)
