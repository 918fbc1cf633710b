"""End-to-end runs of `python -m experiments.train` on every task, in subprocesses as a user runs it."""

import csv
import os
import re

import numpy as np
import pytest

from experiments import train_flags
from tests.experiments import train_runs
from tff_robust.command_line import finite_flags
from tff_robust.processes import delta_fl
from tff_robust.simulation import corruption
from tff_robust import tasks


@pytest.mark.slow
def test_rfa_on_digits_reaches_90_percent_with_default_settings(tmp_path):
  result = train_runs.train(tmp_path, '--task=digits', '--algorithm=rfa')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['eval/accuracy'] >= 0.90
  assert summary['rounds'] == 100 and len(rows) == 100
  assert summary['secure_average_calls'] == 300  # 1 mean + 2 Weiszfeld steps per round
  assert float(rows[-1]['aggregator/objective/1']) <= float(rows[-1]['aggregator/objective/0'])
  assert [r['round'] for r in rows if r['eval/accuracy']] == [str(r) for r in range(10, 101, 10)]
  assert os.listdir(tmp_path / 'run' / 'tensorboard')


@pytest.mark.slow
def test_synthetic_regression_approaches_the_known_optimum(tmp_path):
  result = train_runs.train_here(
      tmp_path, '--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=6', '--rounds_per_eval=1'
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  distances = [float(r['eval/distance_to_optimum']) for r in rows]
  assert distances[-1] < 0.5 * distances[0]
  assert {'eval/mse', 'eval/loss', 'rounds', 'secure_average_calls'} <= set(summary)
  assert summary['secure_average_calls'] == 6
  assert summary['rounds_without_counted_update'] == 0  # every client's update counted in every round
  assert [r['counted_updates'] for r in rows] == ['10'] * 6


@pytest.mark.slow
def test_the_runner_says_once_that_clients_run_on_the_cpu_cores_of_a_worker_without_cuda(tmp_path):
  from tff_robust.runtime import worker_binaries  # pylint: disable=g-import-not-at-top
  result = train_runs.train(tmp_path, '--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=3',
                            '--client_learning_rate=0.2', '--client_lr_decay=0.5', '--client_lr_decay_rounds=2')
  assert result.returncode == 0, result.stderr[-3000:]
  _, rows = train_runs.outputs(tmp_path)
  np.testing.assert_allclose([float(r['client_learning_rate']) for r in rows], [0.2, 0.2, 0.1])  # step decay
  # This machine's worker is TFF's PyPI one, built without CUDA (tests/runtime/test_worker_binaries.py).
  assert worker_binaries.gpu_support(worker_binaries.tff_wheel_binary()) is worker_binaries.GpuSupport.NONE
  placement = [line for line in result.stderr.splitlines() if 'GPU' in line or 'CUDA' in line]
  assert len(placement) == 1, result.stderr[-3000:]
  assert '--gpus=auto: ' in placement[0] and 'built without CUDA' in placement[0]
  assert f'client computation runs on the CPU ({len(os.sched_getaffinity(0))} cores)' in placement[0]
  cpu_only = train_runs.train(tmp_path, '--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=1',
                              '--gpus=none', name='cpu_only')
  assert cpu_only.returncode == 0, cpu_only.stderr[-3000:]
  assert 'CUDA' not in cpu_only.stderr and 'GPU' not in cpu_only.stderr


@pytest.mark.slow
def test_evaluating_every_round_retraces_nothing(tmp_path):
  # Each evaluation built a new model and traced its forward-pass loop again: from the 5th on TensorFlow warned
  # "... calls to <function _Scorer.__init__.<locals>.sums_per_device ...> triggered tf.function retracing".
  result = train_runs.train(tmp_path, '--task=digits', '--algorithm=fedavg', '--total_rounds=7', '--rounds_per_eval=1',
                            '--clients_per_round=3')
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'retracing' not in result.stderr, result.stderr[-3000:]
  _, rows = train_runs.outputs(tmp_path)
  assert all(row['eval/accuracy'] and row['eval/error_p90'] for row in rows)  # 7 evaluations, devices included


@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['coordinate_median', 'trimmed_mean', 'multi_krum', 'bulyan', 'norm_clipping'])
def test_robust_baselines_train_on_digits(tmp_path, algorithm):
  result = train_runs.train_here(tmp_path, '--task=digits', f'--algorithm={algorithm}', '--total_rounds=15',
                                 '--rounds_per_eval=15')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['eval/accuracy'] > 0.3  # well above chance (0.1) after 15 rounds
  if algorithm != 'norm_clipping':
    assert all(r['aggregator/insufficient_clients'] == '0' for r in rows)


_CENTERED_CLIPPING_FLAGS = ('--centered_clipping_radius=0.5', '--centered_clipping_iterations=2')


@pytest.mark.slow
@pytest.mark.parametrize('algorithm, flags, calls', [
    ('bucketing_rfa', ('--bucket_size=3',), 2 * (1 + 3)),
    ('centered_clipping', _CENTERED_CLIPPING_FLAGS, 2 * 2),
    ('filtered_centered_clipping', (*_CENTERED_CLIPPING_FLAGS, '--norm_filter_multiplier=1.5'), 2 * (2 + 2)),
])
def test_secure_defences_run_two_rounds_on_digits(tmp_path, algorithm, flags, calls):
  result = train_runs.train_here(
      tmp_path, '--task=digits', f'--algorithm={algorithm}', '--total_rounds=2', '--rounds_per_eval=2', *flags
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['secure_average_calls'] == calls and len(rows) == 2
  assert 0.0 <= summary['eval/accuracy'] <= 1.0
  if algorithm == 'bucketing_rfa':  # 10 clients in buckets of 3: 3, 3, 3 and 1 (3 if the top two keys collide)
    assert all(r['aggregator/num_buckets'] in ('3', '4') for r in rows)
  if algorithm == 'filtered_centered_clipping':  # the median client is kept, so at most half drop out
    assert all(0 <= int(r['aggregator/num_dropped_clients']) <= 5 for r in rows)


@pytest.mark.slow
def test_a_defence_chain_is_fedavgs_aggregator(tmp_path):
  result = train_runs.train_here(
      tmp_path, '--task=digits', '--algorithm=fedavg', '--defence=arc > bucketing(s=3) > gm(passes=2)',
      '--num_byzantine=2', '--total_rounds=2', '--rounds_per_eval=2',
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['defence'] == 'arc>bucketing(s=3)>gm(passes=2)' and summary['algorithm'] == 'fedavg'
  assert summary['secure_average_calls'] == 2 * (2 + 1 + 2)  # ARC's quantile, the bucket means, two GM passes
  # k = floor(2 * 0.2 * 8) = 3 of 10, and the client at the threshold: the secure quantile's lower bin edge
  # clips it by at most 0.27%.
  assert all(r['aggregator/num_clipped_clients'] in ('3', '4') for r in rows)


@pytest.mark.slow
def test_tffs_baseline_shakespeare_task_runs_offline_on_synthetic_data(tmp_path):
  # TFF's baseline EMNIST task runs so in the README example's test (test_train_defaults.py).
  result = train_runs.train_here(
      tmp_path, '--task=shakespeare_rnn', '--algorithm=rfa_one_step', '--use_synthetic_data', '--total_rounds=1',
      '--clients_per_round=1', '--client_batch_size=4',  # synthetic data: 2 clients, 1 a test device
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary, _ = train_runs.outputs(tmp_path)
  assert summary['secure_average_calls'] == 1
  assert 0.0 <= summary['eval/accuracy'] <= 1.0 and summary['eval/loss'] > 0
  assert 0.0 <= summary['train/error_p90'] <= 1.0  # per-device evaluation of the training devices


@pytest.mark.slow
def test_delta_fl_with_the_secure_quantile_reports_per_device_distributions(tmp_path):
  result = train_runs.train_here(
      tmp_path, '--task=digits', '--algorithm=delta_fl', '--conformity_level=0.5', '--quantile_method=secure',
      '--total_rounds=4', '--rounds_per_eval=2',
  )
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert {'eval/error_mean', 'eval/error_p90', 'eval/loss_p90', 'train/loss_p90'} <= set(summary)
  assert summary['eval/error_p90'] >= summary['eval/error_p50']
  # the model mean + the default quantile passes per round
  assert summary['secure_average_calls'] == 4 * (1 + delta_fl.DEFAULT_QUANTILE_PASSES['secure'])
  assert all(0 < int(r['filter/num_kept']) <= 10 for r in rows)
  with open(tmp_path / 'run' / 'devices.csv') as f:
    devices = list(csv.DictReader(f))
  assert [sum(d['group'] == g for d in devices) for g in ('train', 'eval')] == [30, 12]



@pytest.fixture
def flag_values():
  from absl import flags  # pylint: disable=g-import-not-at-top
  yield flags.FLAGS
  flags.FLAGS.unparse_flags()


def _refusal(flag_values, argv) -> str:
  """The message the runner refuses `argv` with before training: at parsing (absl's validators, then no float flag
  NaN or infinite: `finite_flags.parse_checked`, as `experiments.train` parses), in the check of the remote workers'
  credentials (`experiments.train.check`, before TensorFlow) or in `train_program.check_settings` (the checks that
  need the task or TensorFlow); '' if it accepts it."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import train_program  # pylint: disable=g-import-not-at-top
  try:
    finite_flags.parse_checked(argv, flag_values)
    train_flags.check_remote_workers()
    train_program.check_settings(train_program.create_task())
  except (flags.Error, train_flags.Refusal) as error:
    return str(error)
  return ''


@pytest.mark.parametrize(
    'flag, message',
    [
        ('--total_rounds=0', 'total_rounds'),
        ('--clients_per_round=0', 'clients_per_round'),
        ('--algorithm=fedavgg', 'algorithm'),
        ('--task=mnist', 'task'),
        ('--client_learning_rate=-1', 'client_learning_rate'),
        ('--rfa_num_passes=0', 'rfa_num_passes'),
        ('--rfa_smoothing=0', 'rfa_smoothing'),
        ('--experiment_name=a/b', 'experiment_name'),
        ('--root_output_dir=', 'root_output_dir'),
        ('--trim_fraction=0.5', 'trim_fraction'),
        ('--num_byzantine=-1', 'num_byzantine'),
        ('--clipping_norm=0', 'clipping_norm'),
        ('--bucket_size=0', 'bucket_size'),
        ('--centered_clipping_radius=0', 'centered_clipping_radius'),
        ('--norm_filter_multiplier=0.5', 'norm_filter_multiplier'),
        ('--centered_clipping_iterations=0', 'centered_clipping_iterations'),
        ('--conformity_level=0', 'conformity_level'),
        ('--conformity_level=1.5', 'conformity_level'),
        ('--quantile_method=approximate', 'quantile_method'),
        ('--quantile_passes=0', 'quantile_passes'),
        ('--threshold_period=0', 'threshold_period'),
        ('--fedplus_sigma=-1', 'fedplus_sigma'),
        ('--fedplus_delta=0', 'fedplus_delta'),
        ('--local_init_mixing=1.5', 'local_init_mixing'),
        ('--fedplus_solver=newton', 'fedplus_solver'),
        ('--fedplus_init_client_from=zero', 'fedplus_init_client_from'),
        ('--fedplus_max_iterations=0', 'fedplus_max_iterations'),
        ('--rounds_per_checkpoint=-1', 'rounds_per_checkpoint'),
        ('--channel=wifi', 'channel'),
        ('--algorithm=mtfeel --channel=rayleigh --snr_db=inf', '--snr_db=inf: must be finite'),
        ('--flip_probability=1.5', 'flip_probability'),
        ('--outage_rate=0', 'outage_rate'),
        ('--on_outage=retry', 'on_outage'),
        ('--alpha_learning_rate=-1', 'alpha_learning_rate'),
        ('--pen_scale=-1', 'pen_scale'),
        ('--mtfeel_update_order=both', 'mtfeel_update_order'),
        ('--dde_steps=-1', 'dde_steps'),
        ('--dde_learning_rate=0', 'dde_learning_rate'),
        ('--dde_output=mean', 'dde_output'),
        ('--client_epochs_per_round=0', 'client_epochs_per_round'),
        ('--client_batch_size=0', 'client_batch_size'),
        ('--server_learning_rate=-1', 'server_learning_rate'),
        ('--num_selected=-1', 'num_selected'),
        ('--seed=-1', 'seed'),
        ('--seed=4294967296', 'seed'),
        ('--rounds_per_eval=0', 'rounds_per_eval'),
        ('--stop_after_rounds_without_update=-1', 'stop_after_rounds_without_update'),
        ('--use_synthetic_data=maybe', 'use_synthetic_data'),
        ('--corruption=flip', 'corruption'),
        ('--algorithm=fedavg --defence=arc>median(x=1)', r"--defence: .*median takes no parameters; got 'x'"),
        ('--algorithm=rfa --defence=arc>gm', '--defence is the aggregator of --algorithm=fedavg'),
        ('--corruption_fraction=1', 'corruption_fraction'),
        ('--corruption=alie --alie_z=inf', '--alie_z=inf: must be finite'),
        ('--corruption=alie --alie_z=nan', '--alie_z=nan: must be a number, not NaN'),
        ('--corruption=omniscient --alie_z=1', '--alie_z applies to --corruption=alie, not --corruption=omniscient'),
        ('--corruption=ipm --ipm_epsilon=-0.1', '--ipm_epsilon=-0.1: -0.1 is not a non-negative number'),
        ('--corruption=ipm --ipm_epsilon=inf', '--ipm_epsilon=inf: must be finite'),
        ('--corruption=alie --ipm_epsilon=0.5', '--ipm_epsilon applies to --corruption=ipm, not --corruption=alie'),
        ('--task=synthetic_regression --corruption=label_flipping',
         '--corruption=label_flipping applies to the tasks with class labels .*, not --task=synthetic_regression'),
        ('--task=shakespeare_lstm_rfa --corruption=label_flipping', 'not --task=shakespeare_lstm_rfa'),
        ('--algorithm=delta_fl --corruption=alie', 'delta_fl does not support update corruption'),
        ('--corruption=data --corruption_start_round=0', '--corruption_start_round=0'),
        ('--corruption=data --corruption_start_round=-3', '--corruption_start_round=-3'),
        ('--corruption=data --corruption_start_round=5 --corruption_end_round=3',
         r'--corruption_end_round must be an integer >= start_round \(5\), or unset, got 3'),
        ('--corruption=data --corruption_end_round=0', '--corruption_end_round=0'),
        ('--corruption_end_round=5',
         '--corruption_end_round applies to every --corruption but none, not --corruption=none'),
        ('--corruption_start_round=2', '--corruption_start_round applies to every --corruption but none'),
        ('--corruption=backdoor(target=10)',
         r'--corruption=backdoor\(target=10\): target must be a class in \[0, 9\], got 10 for --task=digits'),
        ('--corruption=backdoor(target=-1)',
         r"--corruption must be .*attack 'backdoor': target must be an integer >= 0"),
        ('--corruption=model_replacement(size=9)', r'size must be an integer in \[1, 8\] \(the trigger must fit'),
        ('--corruption=backdoor(share=0)', r"attack 'backdoor': share must be a number in \(0, 1\], got '0'"),
        ('--corruption=backdoor(share=1.5)', r"share must be a number in \(0, 1\]"),
        ('--task=synthetic_regression --corruption=backdoor',
         r'--corruption=backdoor: backdoor applies to the tasks with a pixel trigger \(digits\), not '
         '--task=synthetic_regression'),
        ('--task=shakespeare_lstm_rfa --corruption=backdoor(target=1)', 'not --task=shakespeare_lstm_rfa'),
        ('--corruption=model_replacement --server_learning_rate=0', r'needs --server_learning_rate > 0, got 0.0'),
        ('--algorithm=delta_fl --corruption=model_replacement', 'delta_fl does not support update corruption'),
        ('--corruption=constrain_and_scale(alpha=0)',
         r"attack 'constrain_and_scale': alpha must be a number in \(0, 1\]"),
        ('--algorithm=fedavg --corruption=constrain_and_scale --client_lr_decay=0.5',
         'constrain_and_scale trains its attackers in a client work without a client learning-rate schedule'),
        ('--algorithm=fedprox --corruption=constrain_and_scale', 'fedprox does not support update corruption'),
        ('--corruption=neurotoxin(top=1)', r"attack 'neurotoxin': top must be a number in \[0, 1\), got '1'"),
        ('--corruption=edge_case(source=10)',
         r'--corruption=edge_case\(source=10\): source must be a class in \[0, 9\], got 10 for --task=digits'),
        ('--corruption=edge_case(source=1,target=1)', "attack 'edge_case': source must differ from target, got both 1"),
        ('--corruption=edge_case(tail=1)', r"attack 'edge_case': tail must be a number in \(0, 1\), got '1'"),
        ('--task=synthetic_regression --corruption=edge_case',
         r'--corruption=edge_case: edge_case applies to the tasks with a pixel trigger \(digits\), not '
         '--task=synthetic_regression'),
        ('--progress_bar=maybe', 'progress_bar'),
        ('--tff_worker_address=localhost', 'tff_worker_address'),
        ('--tff_worker_address=localhost:0', 'tff_worker_address'),
        ('--tff_worker_address=localhost:1 --tff_worker_credentials=/no/such/directory',
         '^--tff_worker_credentials=/no/such/directory: not a directory'),
        ('--tff_worker_credentials=/tmp', '^--tff_worker_credentials is for remote workers'),
        ('--gpus=first', 'gpus'),
        ('--gpus=0,0', 'gpus'),
        ('--gpus=99', 'gpus'),  # more GPUs than any machine of ours has
        ('--gpus=0', '--gpus=0: .* is built without CUDA'),  # this machine's worker is TFF's PyPI one
        ('--worker_binary=/no/such/worker', '--worker_binary must name an executable file'),
        ('--max_concurrent_computation_calls=many', 'max_concurrent_computation_calls'),
        ('--overwrite=maybe', 'overwrite'),
        ('--algorithm=bulyan --clients_per_round=5', 'clients_per_round'),
        ('--algorithm=multi_krum --num_byzantine=4', 'num_byzantine'),
        ('--algorithm=delta_fl --corruption=omniscient', 'delta_fl does not support update corruption'),
        ('--client_lr_decay=0', 'client_lr_decay'),
        ('--client_lr_decay=1.5', 'client_lr_decay'),
        ('--client_lr_decay_rounds=0', 'client_lr_decay_rounds'),
        ('--algorithm=fedplus_avg --client_lr_decay=0.5', 'client_lr_decay applies to'),
        ('--algorithm=fedplus_geomed --corruption=gaussian', 'fedplus_geomed does not support update corruption'),
        ('--fedprox_mu=-1', 'fedprox_mu'),
        ('--algorithm=fedprox --client_learning_rate=0.5 --fedprox_mu=2', r'client_learning_rate \* fedprox_mu < 1'),
        ('--algorithm=fedprox --corruption=omniscient', 'fedprox does not support update corruption'),
        ('--algorithm=personalized_rfa --personal_learning_rate=-1', 'personal_learning_rate'),
        ('--algorithm=personalized_rfa --personal_learning_rate=inf', '--personal_learning_rate=inf: must be finite'),
        ('--algorithm=fedavg --personal_learning_rate=0.01',
         '--personal_learning_rate applies to --algorithm=personalized_rfa, not --algorithm=fedavg'),
        ('--minibatch_fraction=0', 'minibatch_fraction'),
        ('--minibatch_fraction=1.5', 'minibatch_fraction'),
        ('--algorithm=fedavg --minibatch_fraction=0.1', '--minibatch_fraction applies to --algorithm=fedsgd'),
        ('--algorithm=fedsgd --minibatch_fraction=0.1 --client_epochs_per_round=2',
         'needs --client_epochs_per_round=1'),
        ('--straggler_fraction=1.5', 'straggler_fraction'),
        ('--algorithm=signsgd --straggler_fraction=0.9 --client_epochs_per_round=2',
         r'--straggler_fraction applies to every --algorithm but fedsgd\|mtfeel\|signsgd, not --algorithm=signsgd'),
        ('--max_client_examples=0', 'max_client_examples'),
        ('--max_client_examples=-5', 'max_client_examples'),
        ('--algorithm=fedsgd --max_client_examples=10', '--max_client_examples applies to every --algorithm but'),
        # Flags of one algorithm, attack or channel, set for a run without it (experiments/flag_users.py).
        ('--algorithm=rfa --norm_filter_multiplier=3',
         ': --norm_filter_multiplier applies to --algorithm=filtered_centered_clipping, not --algorithm=rfa$'),
        ('--algorithm=rfa --centered_clipping_radius=0.5',
         r': --centered_clipping_radius applies to --algorithm=centered_clipping\|filtered_centered_clipping, not '
         '--algorithm=rfa$'),
        ('--corruption_fraction=0.2',
         ': --corruption_fraction applies to every --corruption but none, not --corruption=none$'),
        ('--algorithm=rfa_one_step --rfa_num_passes=5',
         r'--rfa_num_passes applies to --algorithm=rfa\|bucketing_rfa'),
        ('--algorithm=fedavg --trim_fraction=0.2', 'trim_fraction applies to --algorithm=trimmed_mean'),
        ('--algorithm=bulyan --num_selected=3',
         'num_selected applies to --algorithm=multi_krum, not --algorithm=bulyan'),
        ('--algorithm=multi_krum --clipping_norm=2', 'clipping_norm applies to --algorithm=norm_clipping'),
        ('--algorithm=rfa --bucket_size=3', 'bucket_size applies to --algorithm=bucketing_rfa'),
        ('--algorithm=rfa --centered_clipping_iterations=5', 'centered_clipping_iterations applies to'),
        ('--algorithm=rfa --conformity_level=0.8', 'conformity_level applies to --algorithm=delta_fl'),
        ('--algorithm=delta_fl --quantile_passes=5',
         r'quantile_passes applies to --quantile_method=secure\|secure_mm, not --quantile_method=exact'),
        ('--algorithm=rfa --fedplus_sigma=2', 'fedplus_sigma applies to --algorithm=fedplus_avg'),
        ('--algorithm=fedplus_avg --fedplus_solver=fixed_point',
         'fedplus_solver applies to --algorithm=fedplus_geomed'),
        ('--algorithm=fedavg --fedprox_mu=0.1', 'fedprox_mu applies to --algorithm=fedprox, not --algorithm=fedavg'),
        ('--algorithm=rfa --channel=bsc', r'channel applies to --algorithm=mtfeel\|signsgd, not --algorithm=rfa'),
        ('--algorithm=mtfeel --channel=bsc --snr_db=0',
         r'snr_db applies to --channel=rayleigh\|outage, not --channel=bsc'),
        ('--algorithm=mtfeel --channel=rayleigh --flip_probability=0.1', 'flip_probability applies to --channel=bsc'),
        ('--algorithm=signsgd --dde_steps=3', 'dde_steps applies to --algorithm=mtfeel, not --algorithm=signsgd'),
        ('--algorithm=fedsgd --client_lr_decay=0.5', 'client_lr_decay applies to --algorithm=fedavg'),
        ('--max_client_examples=10 --straggler_fraction=0.5', 'max_client_examples and --straggler_fraction cannot'),
        ('--straggler_fraction=0.5 --client_epochs_per_round=1',
         'straggler_fraction needs --client_epochs_per_round >= 2'),
        ('--l2_regularization=-1', 'l2_regularization'),
        ('--num_devices=0', 'num_devices'),
        ('--split_seed=-1', 'split_seed'),
        ('--split_seed=4294967296', 'split_seed'),
        ('--max_evaluated_devices=0', 'max_evaluated_devices'),
        ('--label_concentration=0', 'label_concentration'),
        ('--label_concentration=inf', 'label_concentration'),
        ('--task=digits_cohorts --label_concentration=100', "--label_concentration applies to the tasks digits, "
         "not 'digits_cohorts'"),
        ('--validation_fraction=0', r'--validation_fraction must be in \(0, 1\)'),
        ('--validation_fraction=1', r'--validation_fraction must be in \(0, 1\)'),
        ('--task=digits_cohorts --validation_fraction=0.2', "--validation_fraction applies to the tasks digits, "
         "digits_robust, digits_personal, shakespeare_lstm_rfa, shakespeare_gru_dfl, not 'digits_cohorts'"),
        ('--task=emnist_cnn_dfl --l2_regularization=0.001',
         "--l2_regularization applies to the tasks sent140_linear, sent140_linear_by_device, emnist_linear_rfa, "
         "emnist_linear_dfl, not 'emnist_cnn_dfl'"),
        ('--task=digits --split_seed=1', "--split_seed applies to the tasks .*, not 'digits'"),
        ('--task=synthetic_regression --num_devices=5', "--num_devices applies to the tasks .*digits_robust"),
        ('--task=sent140_linear_by_device --max_evaluated_devices=9', '--max_evaluated_devices applies to'),
        ('--task=shakespeare_lstm_rfa --shakespeare_source=leaf', 'shakespeare_source'),
        ('--task=digits --shakespeare_source=plays',
         "--shakespeare_source applies to the tasks shakespeare_lstm_rfa, shakespeare_gru_dfl, not 'digits'"),
    ],
)
def test_bad_flags_are_rejected_with_the_flag_named(flag_values, flag, message):
  assert re.search(message, _refusal(flag_values, ['train', *flag.split()]))


def _runner_float_flags() -> list[str]:
  """The runner's float flags as `finite_flags` finds them (importing `train_flags` defines them all)."""
  runner = {flag.name for flag in train_flags.runner_flags()}
  return [flag.name for flag in finite_flags.float_flags() if flag.name in runner]


@pytest.mark.parametrize('value', ['nan', 'inf', '-inf'])
@pytest.mark.parametrize('name', _runner_float_flags())
def test_every_float_flag_refuses_nan_and_infinity_naming_the_flag(flag_values, name, value):
  assert f'--{name}' in _refusal(flag_values, ['train', f'--{name}={value}'])


# Flags every value of which is valid: their type is the whole check (a missing cache directory is the
# data loader's to report: TFF downloads into it).
_FLAGS_WITHOUT_BAD_VALUES = frozenset({'data_cache_dir'})


def test_every_runner_flag_has_a_bad_value_test(flag_values):
  tested = {
      argument.split('=')[0].removeprefix('--')
      for argument, _ in test_bad_flags_are_rejected_with_the_flag_named.pytestmark[0].args[1]
      for argument in argument.split()
  }
  defined = {flag.name for flag in train_flags.runner_flags(flag_values)}
  assert {'algorithm', 'gpus', 'tff_worker_address'} <= defined
  assert defined - tested - _FLAGS_WITHOUT_BAD_VALUES == set()
  # Every float flag (by absl's own flag type) also has its NaN and +-inf tests.
  floats = {
      flag.name for flag in train_flags.runner_flags(flag_values) if flag.flag_type() == 'float'
  }
  assert {'client_learning_rate', 'snr_db'} <= floats
  assert set(_runner_float_flags()) == floats


def test_a_cohort_larger_than_the_task_is_refused_before_any_tff_computation(flag_values, monkeypatch):
  from experiments import train_program  # pylint: disable=g-import-not-at-top
  from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
  from tff_robust.simulation import algorithms  # pylint: disable=g-import-not-at-top

  def must_not_run(*args, **kwargs):
    raise AssertionError('a TFF context or computation was built before the settings were checked')

  monkeypatch.setattr(execution_context, 'set_local_execution_context', must_not_run)
  monkeypatch.setattr(algorithms, 'build_learning_process', must_not_run)
  for argv, message in ((['train', '--clients_per_round=31'], r'clients_per_round must be in \[1, 30\]'),
                        (['train', '--task=digits_cohorts', '--algorithm=mtfeel', '--clients_per_round=10'],
                         'clients_per_round must be the number of clients')):
    flag_values.unparse_flags()
    flag_values(argv)
    with pytest.raises(train_flags.Refusal, match=message):
      train_program.run()


def test_task_options_set_reach_the_task_builder_and_unset_ones_stay_its_defaults(flag_values, monkeypatch):
  from experiments import train_program  # pylint: disable=g-import-not-at-top
  from tff_robust import tasks  # pylint: disable=g-import-not-at-top
  calls = []

  def record(name, **kwargs):
    calls.append((name, kwargs))
    raise StopIteration  # no task, no TFF computation

  monkeypatch.setattr(tasks, 'create_task', record)
  flag_values(['train', '--task=digits_robust', '--num_devices=50', '--split_seed=3'])
  with pytest.raises(StopIteration):
    train_program.run()
  (name, kwargs), = calls
  assert name == 'digits_robust' and kwargs['num_devices'] == 50 and kwargs['split_seed'] == 3
  assert 'l2_regularization' not in kwargs and 'max_evaluated_devices' not in kwargs
  calls.clear()
  flag_values.unparse_flags()
  flag_values(['train', '--task=digits', '--label_concentration=100', '--validation_fraction=0.2'])
  with pytest.raises(StopIteration):
    train_program.run()
  (name, kwargs), = calls
  assert name == 'digits' and kwargs['label_concentration'] == 100.0 and kwargs['validation_fraction'] == 0.2
  calls.clear()
  flag_values.unparse_flags()
  flag_values(['train', '--task=shakespeare_gru_dfl', '--shakespeare_source=tff'])
  with pytest.raises(StopIteration):
    train_program.run()
  (name, kwargs), = calls
  assert name == 'shakespeare_gru_dfl' and kwargs['shakespeare_source'] == 'tff'


def test_bad_flag_stops_the_binary_before_any_output(tmp_path):
  result = train_runs.train(tmp_path, '--total_rounds=0', timeout=120)
  assert result.returncode != 0
  assert 'total_rounds' in result.stderr
  assert not (tmp_path / 'run').exists()


@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['fedplus_avg', 'fedplus_geomed', 'fedplus_comed', 'personalized_rfa',
                                       'local_only'])
def test_personalization_algorithms_report_personal_models(tmp_path, algorithm):
  result = train_runs.train_here(tmp_path, '--task=digits_personal', f'--algorithm={algorithm}', '--total_rounds=3',
                                 '--rounds_per_eval=3', '--clients_per_round=5', '--client_learning_rate=0.05')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, _ = train_runs.outputs(tmp_path)
  assert 0.0 <= summary['personal/error_mean'] < 0.9  # below chance (0.9) after 3 rounds
  assert summary['personal/error_p10'] <= summary['personal/error_p90']
  states = os.listdir(tmp_path / 'run' / 'client_states')
  assert 5 <= len(states) <= 10  # the clients sampled in 3 rounds of 5 out of 10, each stored once


@pytest.mark.slow
def test_personal_learning_rate_sets_the_personal_step(tmp_path):
  """At --personal_learning_rate=0 the personal offsets u_i stay 0, while the default step moves them."""
  for name, extra in (('frozen', ('--personal_learning_rate=0',)), ('paper', ())):
    result = train_runs.train_here(tmp_path, '--task=digits_personal', '--algorithm=personalized_rfa',
                                   '--total_rounds=2', '--rounds_per_eval=2', '--clients_per_round=5', *extra,
                                   name=name)
    assert result.returncode == 0, result.stderr[-3000:]
  norms = {}
  for name in ('frozen', 'paper'):
    directory = tmp_path / name / 'client_states'
    norms[name] = [sum(float(np.abs(leaf).sum()) for leaf in np.load(directory / f).values())
                   for f in os.listdir(directory) if f.endswith('.npz')]
  assert norms['frozen'] and max(norms['frozen']) == 0.0
  assert min(norms['paper']) > 0.0
  assert train_runs.outputs(tmp_path, 'frozen')[0]['personal_learning_rate'] == 0.0


def test_corrupted_runs_report_honest_and_corrupted_clients_apart(tmp_path):
  """personal_honest/* and personal_corrupted/* are the personal distribution over each part of the clients."""
  result = train_runs.train_here(tmp_path, '--task=digits_personal', '--algorithm=personalized_rfa', '--total_rounds=1',
                                 '--clients_per_round=5', '--corruption=data', '--corruption_fraction=0.25', '--seed=3')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, _ = train_runs.outputs(tmp_path)
  task = tasks.create_task('digits_personal', client_epochs=1, client_batch_size=16, seed=3)
  corrupted = corruption.select_corrupted_clients(task, 0.25, 3)
  with open(tmp_path / 'run' / 'devices.csv') as f:
    errors = {row['device_id']: float(row['error']) for row in csv.DictReader(f) if row['group'] == 'personal'}
  assert 0 < len(corrupted) < len(errors)
  assert summary['personal_corrupted/error_mean'] == pytest.approx(np.mean([errors[c] for c in corrupted]))
  assert summary['personal_honest/error_mean'] == pytest.approx(
      np.mean([e for c, e in errors.items() if c not in corrupted])
  )


def test_fedprox_trains_two_rounds_with_its_proximal_strength(tmp_path):
  result = train_runs.train_here(tmp_path, '--task=fedprox_synthetic', '--algorithm=fedprox', '--fedprox_mu=0.5',
                                 '--total_rounds=2', '--rounds_per_eval=2', '--clients_per_round=5',
                                 '--client_batch_size=10', '--client_learning_rate=0.01')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['algorithm'] == 'fedprox' and summary['fedprox_mu'] == 0.5 and len(rows) == 2
  assert 0.0 <= summary['eval/accuracy'] <= 1.0 and np.isfinite(summary['eval/loss'])


def test_stragglers_train_fewer_epochs(tmp_path):
  common = ('--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=2', '--client_epochs_per_round=5')
  for name, stragglers in (('all', '--straggler_fraction=1'), ('none', '--straggler_fraction=0')):
    result = train_runs.train_here(tmp_path, *common, stragglers, name=name)
    assert result.returncode == 0, result.stderr[-3000:]
  (summary, slow), (_, full) = train_runs.outputs(tmp_path, 'all'), train_runs.outputs(tmp_path, 'none')
  assert summary['straggler_fraction'] == 1.0
  examples = lambda rows: [float(row['train/num_examples']) for row in rows]
  assert all(s < f for s, f in zip(examples(slow), examples(full)))  # U{1..5} epochs: < 5 for 10 clients


def test_capped_clients_train_on_at_most_the_cap(tmp_path):
  result = train_runs.train_here(tmp_path, '--task=synthetic_regression', '--algorithm=fedavg', '--total_rounds=1',
                                 '--client_epochs_per_round=2', '--max_client_examples=3')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['max_client_examples'] == 3
  import json  # pylint: disable=g-import-not-at-top
  settings = json.loads((tmp_path / 'run' / 'run_settings.json').read_text())
  assert settings['max_client_examples'] == 3  # a defining flag: a resumed run must use the same cap
  assert float(rows[0]['train/num_examples']) == 2 * 3 * int(summary['clients_per_round'])


@pytest.mark.slow
@pytest.mark.parametrize('algorithm, flags', [
    ('mtfeel', ('--channel=rayleigh', '--snr_db=0', '--dde_steps=1')),
    ('signsgd', ('--channel=bsc', '--flip_probability=0.1', '--server_learning_rate=0.01')),
    ('fedsgd', ()),
    ('fedsgd', ('--minibatch_fraction=0.1',)),
])
def test_sign_algorithms_and_fedsgd_train_every_device_of_digits_cohorts(tmp_path, algorithm, flags):
  result = train_runs.train_here(tmp_path, '--task=digits_cohorts', f'--algorithm={algorithm}',
                                 '--clients_per_round=30', '--total_rounds=2', '--rounds_per_eval=2',
                                 '--client_batch_size=20', *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert 0.0 <= summary['personal/error_mean'] <= 1.0 and len(rows) == 2
  if algorithm == 'fedsgd':
    assert summary.get('minibatch_fraction') == (0.1 if flags else None)
    assert float(rows[-1]['train/num_examples']) == 30 * (2 if flags else 20)  # ceil(0.1 * 20) of each device's 20
    return
  bits, errors = float(rows[-1]['aggregator/channel/bits']), float(rows[-1]['aggregator/channel/bit_errors'])
  assert bits == 30 * 650 * (30 if algorithm == 'mtfeel' else 1)
  assert 0.0 < errors / bits < 0.3  # Rayleigh at 0 dB: 0.146; BSC: 0.1
  if algorithm == 'mtfeel':
    alpha = np.load(tmp_path / 'run' / 'alpha.npy')
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, atol=1e-5)
    assert np.load(tmp_path / 'run' / 'discrepancies.npy').shape == (30, 30)
    assert 'server/objective' in rows[-1]


@pytest.mark.slow
@pytest.mark.parametrize('attack, flags', [
    ('alie', ('--alie_z=1.5',)), ('ipm', ('--ipm_epsilon=0.5',)), ('sign_flipping', ()), ('label_flipping', ()),
    ('norm_aware(direction=ipm,c=1.40)', ()),
])
def test_the_attacks_of_issue_22_train_two_rounds_on_digits(tmp_path, attack, flags):
  result = train_runs.train_here(tmp_path, '--algorithm=fedavg', '--total_rounds=2', '--rounds_per_eval=2',
                                 f'--corruption={attack}', '--corruption_fraction=0.3', *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['corruption'] == attack and summary['corruption_weight_share'] >= 0.3 and len(rows) == 2
  assert {'alie': {'alie_z': 1.5}, 'ipm': {'ipm_epsilon': 0.5}}.get(attack, {}).items() <= summary.items()
  assert summary.get('attack') == {'alie': 'alie(z=1.5)', 'ipm': 'ipm(eps=0.5)', 'sign_flipping': 'sign_flipping',
                                   'label_flipping': None}.get(attack, 'norm_aware(direction=ipm,c=1.4)')
  assert 0.0 <= summary['eval/accuracy'] <= 1.0 and np.isfinite(summary['eval/loss'])
  if attack != 'label_flipping':  # update attacks count the flagged clients of each cohort
    assert sum(float(row['aggregator/num_corrupted_clients']) for row in rows) > 0


@pytest.mark.slow
def test_the_edge_case_backdoor_in_a_window_of_rounds_reports_its_attack_success_rate(tmp_path):
  """A data poisoning (no update half), in rounds 1-2 of 3: every evaluation reports the ASR on the held-out
  tail beside the accuracy."""
  result = train_runs.train_here(tmp_path, '--algorithm=fedavg', '--total_rounds=3', '--rounds_per_eval=1',
                                 '--clients_per_round=5', '--corruption=edge_case(target=1,tail=0.2)',
                                 '--corruption_fraction=0.3', '--corruption_end_round=2')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['corruption'] == 'edge_case(target=1,tail=0.2)' and summary.get('attack') is None
  assert summary['corruption_end_round'] == 2 and len(rows) == 3
  assert all(0.0 <= float(row['eval/attack_success_rate']) <= 1.0 for row in rows)
  assert summary['eval/attack_success_rate'] == float(rows[-1]['eval/attack_success_rate'])


@pytest.mark.slow
@pytest.mark.parametrize('spec, attack', [('model_replacement(target=0)', 'boost'),
                                          ('constrain_and_scale(target=0,alpha=0.5)', 'boost'),
                                          ('neurotoxin(target=0,top=0.2)', 'masked(top=0.2)')])
def test_a_targeted_attack_in_a_window_of_rounds_reports_its_attack_success_rate(tmp_path, spec, attack):
  """The targeted attacks with an update half, in round 2 only (half the data corrupted: every cohort of this
  seed has attackers): the attackers are flagged in that round alone, and every evaluation reports the attack
  success rate beside the accuracy."""
  result = train_runs.train_here(tmp_path, '--algorithm=fedavg', '--total_rounds=3', '--rounds_per_eval=1',
                                 '--clients_per_round=5', f'--corruption={spec}',
                                 '--corruption_fraction=0.5', '--corruption_start_round=2', '--corruption_end_round=2')
  assert result.returncode == 0, result.stderr[-3000:]
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['attack'] == attack and summary['corruption_end_round'] == 2
  assert [int(float(row['aggregator/num_corrupted_clients'])) > 0 for row in rows] == [False, True, False]
  assert all(0.0 <= float(row['eval/attack_success_rate']) <= 1.0 for row in rows)
  assert summary['eval/attack_success_rate'] == float(rows[-1]['eval/attack_success_rate'])
  assert "'eval/attack_success_rate'" in result.stdout  # the headline
