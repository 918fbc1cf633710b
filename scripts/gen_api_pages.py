"""Generates the site's API reference from the docstrings, and fails the build on a public name without one.

mkdocs-gen-files runs this file during `mkdocs build` (mkdocs.yml, `gen-files`). It walks the `tff_robust`
package on disk, so a new module gets its page without editing anything:
- one page per public module, `reference/tff_robust/<package>/<module>.md`, holding the mkdocstrings directive
  `::: tff_robust.<package>.<module>` (a package's `__init__` becomes its folder's `index.md`);
- `reference/SUMMARY.md`, the navigation that mkdocs-literate-nav reads.

Public means: a module, class, function or method whose own name and whose modules' names do not start with `_`
(`tff_robust._lazy_submodules` and everything in it is private), defined in `tff_robust` (a name imported from
elsewhere is documented where it is defined). Before writing any page it reads the package with griffe, as
mkdocstrings does (statically: TensorFlow is not imported), and raises `UndocumentedError` naming every public
name without a docstring.

`python scripts/gen_api_pages.py` prints those names (exit status 1 if there are any) without building the site.
"""

import pathlib
import sys

import griffe

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = 'tff_robust'


class UndocumentedError(RuntimeError):
  """Public names of the package without a docstring."""


def _public(name: str) -> bool:
  return not name.startswith('_')


def _undocumented(obj) -> list[str]:
  """The dotted paths of `obj`'s public members (recursively) that have no docstring."""
  missing = []
  for name, member in obj.members.items():
    if member.is_alias or not _public(name):
      continue
    if member.is_module or member.is_class or member.is_function:
      if not (member.docstring and member.docstring.value.strip()):
        missing.append(member.path)
    if member.is_module or member.is_class:
      missing += _undocumented(member)
  return missing


def undocumented_public_names(repo: pathlib.Path = REPO) -> list[str]:
  """Every public module, class, function and method of `tff_robust` without a docstring, sorted."""
  package = griffe.load(repo / PACKAGE, resolve_aliases=False)  # by path: never an installed copy
  missing = [] if package.docstring else [PACKAGE]
  return sorted(missing + _undocumented(package))


def module_pages(repo: pathlib.Path = REPO) -> list[tuple[str, pathlib.PurePosixPath]]:
  """(dotted module name, page path under the site's docs) of every public module, in path order."""
  pages = []
  for source in sorted((repo / PACKAGE).rglob('*.py')):
    parts = source.relative_to(repo).with_suffix('').parts
    if parts[-1] == '__init__':
      parts = parts[:-1]
      page = pathlib.PurePosixPath('reference', *parts, 'index.md')
    else:
      page = pathlib.PurePosixPath('reference', *parts).with_suffix('.md')
    if all(_public(part) for part in parts):
      pages.append(('.'.join(parts), page))
  return pages


def write_pages() -> None:
  """Writes the reference pages and their navigation into the build (mkdocs-gen-files' virtual files)."""
  import mkdocs_gen_files  # pylint: disable=import-outside-toplevel  (only inside `mkdocs build`)

  missing = undocumented_public_names()
  if missing:
    raise UndocumentedError(f'{len(missing)} public names have no docstring: ' + ', '.join(missing))
  nav = mkdocs_gen_files.Nav()
  for module, page in module_pages():
    nav[tuple(module.split('.'))] = page.relative_to('reference').as_posix()
    with mkdocs_gen_files.open(page.as_posix(), 'w') as f:
      f.write(f'# `{module}`\n\n::: {module}\n')
    source = pathlib.Path(PACKAGE, *module.split('.')[1:])
    mkdocs_gen_files.set_edit_path(page.as_posix(), (source / '__init__.py' if page.name == 'index.md'
                                                     else source.with_suffix('.py')).as_posix())
  with mkdocs_gen_files.open('reference/SUMMARY.md', 'w') as f:
    f.writelines(nav.build_literate_nav())


if __name__ == '<run_path>':  # mkdocs-gen-files runs this file with runpy.run_path, which names it so
  write_pages()
elif __name__ == '__main__':
  names = undocumented_public_names()
  print('\n'.join(names) if names else 'every public name has a docstring')
  sys.exit(1 if names else 0)
