"""The code blocks of README.md and docs/, and the pytest plugin that runs their Python blocks.

A block is marked by an HTML comment on the line directly before its opening fence:
  `<!-- not run: REASON -->`  the block runs nowhere (it needs a remote host, hours, or is a fragment);
  `<!-- slow: REASON -->`     it runs in the slow set (`pytest tests -m slow`);
no comment: it runs in the default set. Python blocks run with pytest-markdown-docs (`pytest --markdown-docs
-p tests.markdown_blocks README.md docs`, as `tests/test_docs_examples.py` does): this plugin marks its items `slow`
or skips them by the same comments. Blocks are found with markdown-it, the parser pytest-markdown-docs uses.
"""

import dataclasses
import pathlib
import re

import pytest

from tests import repository

DOCUMENTS = [repository.ROOT / 'README.md', *sorted((repository.ROOT / 'docs').rglob('*.md'))]
PYTHON = ('python', 'py', 'python3')
SHELL = ('bash', 'sh', 'shell', 'console')
_MARKER = re.compile(r'^<!-- (not run|slow): (.+) -->$')


@dataclasses.dataclass(frozen=True)
class Block:
  """One fenced code block: its document, the line of its opening fence (1-based), language, code and marker
  ('not run', 'slow' or None) with its reason."""

  path: pathlib.Path
  line: int
  language: str
  code: str
  marker: str | None
  reason: str | None


def blocks(path: pathlib.Path) -> list[Block]:
  """Every fenced code block of the Markdown file `path`, in order."""
  from markdown_it import MarkdownIt  # pylint: disable=import-outside-toplevel
  lines = path.read_text().splitlines()
  found = []
  for token in MarkdownIt('commonmark').parse(path.read_text()):
    if token.type != 'fence' or not token.map:
      continue
    start = token.map[0]
    marker = _MARKER.match(lines[start - 1].strip()) if start > 0 else None
    found.append(Block(path, start + 1, (token.info.split() or [''])[0], token.content,
                       marker.group(1) if marker else None, marker.group(2) if marker else None))
  return found


def pytest_collection_modifyitems(items):
  """Marks each pytest-markdown-docs item by its block's comment: `slow`, or skipped with the reason."""
  by_start = {(b.path.resolve(), b.line): b for path in DOCUMENTS for b in blocks(path)}
  for item in items:
    definition = getattr(item, 'test_definition', None)
    if definition is None:
      continue
    block = by_start.get((pathlib.Path(definition.source_path).resolve(), definition.start_line))
    if block is None or block.marker is None:
      continue
    if block.marker == 'slow':
      item.add_marker(pytest.mark.slow)
    else:
      item.add_marker(pytest.mark.skip(reason=f'not run: {block.reason}'))
