"""`targeted_runs`: the sweep's refusals of targeted attacks by flag, their attack window and evaluation rounds, and
the ASR columns of a row read from a run's summary and metrics.csv."""

import pytest

from experiments import targeted_runs
from tff_robust.core import corruption as core_corruption
from tff_robust.core.attacks import targeted_catalog

_OK = dict(task='digits', total_rounds=50, rounds_after_attack=20, server_learning_rate=1.0)


@pytest.mark.parametrize('kinds, changes, message', [
    (['backdoor'], dict(rounds_after_attack=50),
     '--rounds_after_attack=50 does not fit in --total_rounds=50: the attackers need at least one round'),
    (['omniscient', 'data'], {},
     '--rounds_after_attack=20 measures how long a backdoor lasts after its attackers stop: it needs a targeted attack '
     f'in --corruptions ({", ".join(targeted_catalog.TARGETED_ATTACK_NAMES)})'),
    (['backdoor'], dict(task='synthetic_regression'),
     '--corruptions=backdoor: backdoor applies to the tasks with a pixel trigger (digits), not '
     '--task=synthetic_regression'),
    (['backdoor(target=10)'], {}, '--corruptions=backdoor(target=10): target must be a class in [0, 9], got 10'),
    (['backdoor(size=9)'], {}, '--corruptions=backdoor(size=9): size must be an integer in [1, 8]'),
    (['edge_case(source=10)'], {}, '--corruptions=edge_case(source=10): source must be a class in [0, 9], got 10'),
    (['model_replacement'], dict(server_learning_rate=0.0),
     '--corruptions=model_replacement boosts by the server learning rate: it needs --server_learning_rate > 0'),
])
def test_what_the_sweep_cannot_run_is_refused_by_flag(kinds, changes, message):
  with pytest.raises(ValueError) as error:
    targeted_runs.check(kinds, **dict(_OK, **changes))
  assert message in str(error.value)


def test_a_runnable_sweep_passes_the_check():
  targeted_runs.check(['backdoor(size=4)', 'model_replacement', 'edge_case(source=3)', 'omniscient'], **_OK)
  targeted_runs.check(['omniscient'], **dict(_OK, rounds_after_attack=0))


def test_constrain_and_scale_gives_its_alpha_and_the_other_corruptions_none():
  assert targeted_runs.attacker_alpha('constrain_and_scale(alpha=0.5)') == 0.5
  assert targeted_runs.attacker_alpha('constrain_and_scale') == targeted_catalog.DEFAULT_ALPHA
  assert [targeted_runs.attacker_alpha(kind) for kind in ('backdoor', 'model_replacement', 'omniscient', 'none')] == [
      None] * 4


def test_only_targeted_attacks_get_a_window_ending_n_rounds_before_the_end():
  assert targeted_runs.window('backdoor', 50, 20) == core_corruption.AttackWindow(1, 30)
  assert targeted_runs.window('omniscient', 50, 20) is None
  assert targeted_runs.window('none', 50, 20) is None
  assert targeted_runs.window('backdoor', 50, 0) is None
  # evaluated at round 30 and at the end (50), or only at the end without a window
  assert targeted_runs.rounds_per_eval(50, 20) == 30 and targeted_runs.rounds_per_eval(50, 0) == 50


def test_row_fields_take_the_final_asr_and_the_evaluation_at_the_attacks_end(tmp_path):
  (tmp_path / 'metrics.csv').write_text(
      'round,train/loss,eval/accuracy,eval/attack_success_rate\n1,2.0,,\n2,1.5,0.75,0.875\n3,1.0,,\n4,0.5,0.8,0.25\n')
  summary = {'eval/accuracy': 0.8, 'eval/attack_success_rate': 0.25}
  assert targeted_runs.row_fields('backdoor', summary, str(tmp_path), 4, 2) == dict(
      attack_success_rate=0.25, rounds_after_attack=2, attack_end_round=2, accuracy_at_attack_end=0.75,
      attack_success_rate_at_attack_end=0.875)
  # a clean run of the same sweep: its accuracy at round 2, no ASR
  assert targeted_runs.row_fields('none', {'eval/accuracy': 0.8}, str(tmp_path), 4, 2) == dict(
      attack_success_rate='', rounds_after_attack=2, attack_end_round=2, accuracy_at_attack_end=0.75,
      attack_success_rate_at_attack_end='')
  # attackers in every round: the final evaluation only
  assert targeted_runs.row_fields('backdoor', summary, str(tmp_path), 4, 0) == dict(
      attack_success_rate=0.25, rounds_after_attack='', attack_end_round='', accuracy_at_attack_end='',
      attack_success_rate_at_attack_end='')
