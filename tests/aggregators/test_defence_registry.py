"""The defence registry's spec syntax, its refusals and its secure flags (no TensorFlow needed)."""

import subprocess
import sys

import pytest

from tff_robust.aggregators import defences
from tff_robust.aggregators.defences import registry


@pytest.mark.parametrize('spec,canonical', [
    ('arc>gm', 'arc>gm'),
    (' bucketing( s = 2 ) > centered_clipping(tau=0.3,iters=3) ', 'bucketing(s=2)>centered_clipping(tau=0.3,iters=3)'),
    ('norm_filter(k=1.5)>centered_clipping(tau=0.3)', 'norm_filter(k=1.5)>centered_clipping(tau=0.3)'),
    ('nnm>krum', 'nnm>krum'),
    ('gm(init=zero,passes=1,nu=1e-6)', 'gm(passes=1,nu=1e-06,init=zero)'),
    ('clipping(c=2)>arc(f=1)>nnm(f=1)>bucketing(s=3)>median',
     'clipping(c=2.0)>arc(f=1)>nnm(f=1)>bucketing(s=3)>median'),
    ('rlr(theta=3)>weak_dp(m=2,sigma=0.1,seed=1)', 'rlr(theta=3)>weak_dp(m=2.0,sigma=0.1,seed=1)'),
    ('flame(lambda=0.01)', 'flame(lambda=0.01)'),
])
def test_specs_parse_and_print_canonically(spec, canonical):
  chain = defences.parse(spec)
  assert str(chain) == canonical
  assert defences.parse(str(chain)) == chain  # the canonical spec parses back to the same chain


def test_the_names_split_into_pre_aggregators_and_rules():
  assert set(defences.PRE_AGGREGATOR_NAMES) == {'clipping', 'arc', 'nnm', 'bucketing', 'norm_filter', 'rlr'}
  assert set(defences.RULE_NAMES) == {'mean', 'gm', 'centered_clipping', 'median', 'trimmed_mean', 'krum', 'bulyan',
                                      'weak_dp', 'flame'}


@pytest.mark.parametrize('spec,secure', [
    ('mean', True), ('gm', True), ('centered_clipping', True), ('arc>gm', True),
    ('clipping>bucketing>norm_filter>centered_clipping', True), ('nnm>gm', False), ('arc>median', False),
    ('trimmed_mean', False), ('krum', False), ('bulyan', False), ('weak_dp', True), ('rlr>mean', True),
    ('rlr(theta=3)>weak_dp(m=2,sigma=0.1)', True), ('flame', False), ('rlr>flame', False),
])
def test_a_chain_is_secure_when_every_part_is(spec, secure):
  assert defences.is_secure(spec) is secure
  assert registry.non_secure_components(spec) == [
      c.name for c in defences.parse(spec).components
      if c.name in ('nnm', 'median', 'trimmed_mean', 'krum', 'bulyan', 'flame')
  ]


@pytest.mark.parametrize('spec,message', [
    ('', 'non-empty'),
    ('foo>gm', "unknown component 'foo'.*pre-aggregators: .*arc.*rules: .*gm"),
    ('arc', 'must end with a rule'),
    ('gm>mean', 'gm is a rule and must come last'),
    ('gm(passes=0)', r'gm\(passes=0\): passes must be an integer >= 1'),
    ('gm(passes=2.5)', 'passes must be an integer'),
    ('gm(smoothing=1)', 'gm takes passes, nu, init'),
    ('gm(init=median)', 'init must be one of mean, zero'),
    ('centered_clipping(tau=nan)', 'tau must be a finite number > 0'),
    ('centered_clipping(tau=0.3,tau=0.5)', 'sets tau twice'),
    ('trimmed_mean(beta=0.5)', 'beta must be a finite number >= 0 and < 0.5'),
    ('gm(passes)', 'param=value'),
    ('arc>>gm', 'cannot read'),
    ('bucketing>krum', 'krum cannot follow bucketing.*counts clients'),
    ('bucketing>arc>gm', 'arc cannot follow bucketing'),
    ('bucketing(s=2)>nnm>mean', 'nnm cannot follow bucketing'),
    ('weak_dp(sigma=nan)', r'weak_dp\(sigma=nan\): sigma must be a finite number >= 0'),
    ('weak_dp(sigma=-0.1)', r'weak_dp\(sigma=-0.1\): sigma must be a finite number >= 0'),
    ('weak_dp(m=0)', 'm must be a finite number > 0'),
    ('weak_dp(seed=-1)', 'seed must be an integer >= 0'),
    ('rlr(theta=-1)>mean', r'rlr\(theta=-1\): theta must be an integer >= 0'),
    ('rlr(theta=2.5)>mean', 'theta must be an integer'),
    ('rlr', 'must end with a rule'),
    ('bucketing>rlr>mean', 'rlr cannot follow bucketing'),
    ('flame(lambda=nan)', r'flame\(lambda=nan\): lambda must be a finite number >= 0'),
    ('flame(lambda=-0.001)', 'lambda must be a finite number >= 0'),
    ('bucketing>flame', 'flame cannot follow bucketing'),
])
def test_bad_specs_are_refused_naming_the_part(spec, message):
  with pytest.raises(ValueError, match=message):
    defences.parse(spec)


def test_rules_of_the_weighted_distribution_may_follow_bucketing_and_counting_parts_may_precede_it():
  for spec in ('bucketing>gm', 'bucketing>median', 'bucketing>centered_clipping', 'arc>nnm>bucketing>mean'):
    defences.parse(spec)


def test_defaults_of_f_and_beta_come_from_the_build():
  krum, trimmed = defences.parse('krum').rule, defences.parse('trimmed_mean').rule
  assert krum.arguments(clients_per_round=10, num_byzantine=3) == {'f': 3, 'select': 1}
  assert defences.parse('krum(f=1)').rule.arguments(clients_per_round=10, num_byzantine=3)['f'] == 1
  assert trimmed.arguments(clients_per_round=10, num_byzantine=2) == {'beta': 0.2}


@pytest.mark.parametrize('name', ['weak_dp', 'flame'])
def test_an_unset_noise_seed_is_the_builds_and_a_set_one_is_kept(name):
  unset, chosen = defences.parse(name).rule, defences.parse(f'{name}(seed=5)').rule
  assert unset.arguments(clients_per_round=10, num_byzantine=0, seed=3)['seed'] == 3
  assert unset.arguments(clients_per_round=10, num_byzantine=0)['seed'] == 0
  assert chosen.arguments(clients_per_round=10, num_byzantine=0, seed=3)['seed'] == 5
  assert registry.uses_run_seed(f'rlr>{name}') and not registry.uses_run_seed(f'rlr>{name}(seed=5)')
  assert not registry.uses_run_seed('arc>gm')



def test_a_list_of_specs_splits_on_semicolons():
  chains = defences.parse_list('arc>gm; bucketing(s=2)>centered_clipping(tau=0.3,iters=3);')
  assert [str(c) for c in chains] == ['arc>gm', 'bucketing(s=2)>centered_clipping(tau=0.3,iters=3)']


def test_parsing_imports_no_tensorflow():
  code = ('import sys; from tff_robust.aggregators import defences; defences.parse("arc>gm"); '
          'defences.is_secure("nnm>gm"); print("tensorflow" in sys.modules)')
  assert subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout == 'False\n'


def test_a_preset_names_its_chain_and_parses_like_it():
  chain = defences.parse('recommended_secure')
  assert chain == defences.parse(registry.PRESETS['recommended_secure']) == defences.parse(' recommended_secure ')
  assert defences.is_secure(chain)
  with pytest.raises(ValueError, match='presets: recommended_secure'):
    defences.parse('recommended')


def test_the_recommended_preset_is_the_best_worst_case_of_the_validation_sweep():
  """The preset is what its validation sweep chose: of the secure-compatible chains tried on the validation split
  (never the test split), the one whose worst case over the whole attack suite is highest."""
  import csv  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  from experiments import worst_case_tables  # pylint: disable=g-import-not-at-top
  validation = pathlib.Path(__file__).resolve().parents[2] / 'results/robustness_worst_case_digits/validation'
  rows = [row for path in sorted(validation.glob('*/results.csv')) for row in csv.DictReader(path.open())]
  worst = worst_case_tables.worst_cases(rows, 0.25)
  assert len(worst) >= 5 and all(defences.is_secure(spec) for spec in worst)
  best = max(worst, key=lambda spec: worst[spec][0])
  assert defences.parse(best) == defences.parse('recommended_secure'), worst
