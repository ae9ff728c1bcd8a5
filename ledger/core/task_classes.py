"""Task classes: the git repository a log names, and the budget file's folder rules.

A task class groups the sessions that one budget should fit. For a real agent log the
natural group is the repository the agent worked in, so :func:`repo_name` reads it from what
the log says, never from the disk (the importers stay pure and the same log gives the same
class on any machine):

* a Codex rollout's ``git.repository_url`` names it (``git@host:org/api.git`` -> ``api``);
* else the working folder (``cwd``) does, with the worktree layouts resolved to the repository
  they belong to: ``<repo>/.claude/worktrees/<name>`` (Claude Code), ``<repo>/.git/worktrees/
  <name>``, ``<repo>/.worktrees/<name>`` and ``<repo>-worktrees/<name>``;
* a temporary folder (``tmpk3j4_x9q``: Python's ``tempfile``, which test harnesses and
  sandboxes use) names no repository: all such sessions are the class :data:`TEMP_CLASS`.

:class:`TaskClasses` holds the budget file's ``[task_classes]`` table (a folder glob to a
name, first match wins), which overrides all of that for the folders it matches.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re

from msgspec import Struct

TEMP_CLASS = "tmp"
#: A folder made by Python's tempfile (``tmp`` and 8 characters of ``[a-z0-9_]``).
_TEMP_NAME = re.compile(r"tmp[a-z0-9_]{8}")
_WORKTREE_MARKERS = ((".claude", "worktrees"), (".git", "worktrees"), (".worktrees",))
_SUFFIX = "-worktrees"


def _parts(path: str) -> list[str]:
    return [p for p in re.split(r"[\\/]", path) if p]


def repo_name(folder: str | None, repository_url: str | None = None) -> str | None:
    """The repository a session worked in, from its git URL if the log gives one, else from
    its working folder (see the module doc); None when the log names neither."""
    if repository_url:
        name = _parts(repository_url.rsplit(":", 1)[-1])
        if name:
            return name[-1].removesuffix(".git") or None
    if not folder:
        return None
    parts = _parts(folder)
    for i, part in enumerate(parts):
        for marker in _WORKTREE_MARKERS:
            if i > 0 and tuple(parts[i:i + len(marker)]) == marker and len(parts) > i + len(marker):
                return parts[i - 1]
        if part.endswith(_SUFFIX) and len(part) > len(_SUFFIX) and i < len(parts) - 1:
            return part.removesuffix(_SUFFIX)
    if not parts:
        return None
    return TEMP_CLASS if _TEMP_NAME.fullmatch(parts[-1]) else parts[-1]


class TaskClasses(Struct, frozen=True):
    """Folder globs to task class names (the budget file's ``[task_classes]``), in order.

    A glob is matched (``fnmatch``, case-sensitive) against the whole folder with ``/`` as its
    separator; ``*`` matches across ``/``, so ``"*/tmp*"`` matches ``/tmp/tmpk3j4_x9q``.
    """

    rules: tuple[tuple[str, str], ...] = ()

    def name_for(self, folder: str | None) -> str | None:
        """The name of the first rule whose glob matches ``folder``; None if none does."""
        if not folder or not self.rules:
            return None
        path = folder.replace("\\", "/").rstrip("/") or "/"
        for glob, name in self.rules:
            if fnmatch.fnmatchcase(path, glob):
                return name
        return None

    @property
    def digest(self) -> str:
        """Changes with the rules (part of the fold digest: a new rule re-folds)."""
        return hashlib.sha256(json.dumps(self.rules).encode()).hexdigest()[:16]
