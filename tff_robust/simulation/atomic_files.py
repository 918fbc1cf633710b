"""Files replaced whole or not at all: written to a temporary file in the same directory (flushed to disk by
`write_atomically`), then renamed over the target (`os.replace`, atomic on POSIX), so a crash or a kill leaves the
old file or the new one, never a torn one. Used for what a resumed run reads back: client states, their manifests,
`summary.json` and a sweep's `results.csv`.
"""

import os
import stat
import tempfile
from typing import Callable

TMP_PREFIX = '.tmp-'  # a writer's temporary files; a directory's owner may remove leftovers of a crash


def _read_umask() -> int:
  mask = os.umask(0)  # the only portable way to read it: once, at import, before any thread writes files
  os.umask(mask)
  return mask


_UMASK = _read_umask()


def fsync_directory(directory: str) -> None:
  """Makes renames and links in `directory` durable where the platform allows opening a directory."""
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def replace_atomically(path: str, fill_fn: Callable[[str], None]) -> None:
  """Calls `fill_fn(tmp_path)` to create a temporary file next to `path`, then renames it over `path`; the
  temporary file is removed if anything fails. The new file keeps the old one's permissions, or takes those an
  `open` would give (0666 less the umask): `mkstemp`'s 0600 would hide results from the owner's other users."""
  fd, tmp_path = tempfile.mkstemp(dir=os.path.dirname(path) or '.', prefix=TMP_PREFIX)
  os.close(fd)
  try:
    fill_fn(tmp_path)
    os.chmod(tmp_path, stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else 0o666 & ~_UMASK)
    os.replace(tmp_path, path)
  except BaseException:
    if os.path.exists(tmp_path):
      os.remove(tmp_path)
    raise


def write_atomically(path: str, write_fn: Callable) -> None:
  """Calls `write_fn(file)` on a binary temporary file next to `path`, then renames it over `path`."""

  def fill(tmp_path):
    with open(tmp_path, 'wb') as f:
      write_fn(f)
      f.flush()
      os.fsync(f.fileno())

  replace_atomically(path, fill)


def write_text_atomically(path: str, text: str) -> None:
  """Replaces `path` by `text` (UTF-8) whole: readers see the old content or `text`, never part of it."""
  write_atomically(path, lambda f: f.write(text.encode('utf-8')))
