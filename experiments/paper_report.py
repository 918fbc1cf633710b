r"""Collects runs into the papers' table layouts (mean ± std over seeds) beside the published numbers.

  python -m experiments.paper_report --inputs=/tmp/tff_robust_runs/fig2 --output_dir=/tmp/paper_report
  python -m experiments.paper_report --output_dir=results/paper_report_digits \
      --inputs=digits=results/robustness_sweep_digits/results.csv,digits=results/superquantile_tables_digits/results.csv

--inputs: directories (every summary.json below them, e.g. the --root_output_dir of runs made with the flagfiles
under experiments/configs/), summary.json files, or results.csv files of experiments.robustness_sweep and
experiments.superquantile_tables; a results.csv names no task, so give it as TASK=PATH (default --csv_task).
Writes to --output_dir:
  rfa_tables.md, rfa_accuracy_vs_corruption.png   RFA Fig. 2/3/5/6 layout: accuracy (%) by algorithm x rho,
      per task and corruption, with the paper's numbers (experiments/configs/published_numbers.json);
  rfa_accuracy_vs_calls.png   RFA Fig. 4: accuracy against secure-average oracle calls and against rounds, per
      task x corruption x rho (from the metrics.csv of run directories; experiments/convergence_curves.py);
  dfl_tables.md, dfl_test_device_error.png        Delta-FL Tables 2-3: 90th percentile and mean test-device
      error (%), FedAvg and theta = 0.8, 0.5, 0.1, beside the paper's five rows;
  dfl_device_histograms.png   Delta-FL Fig. 4: histograms of the per-device test error and training loss, one
      row per task x method (from the devices.csv of run directories; experiments/device_histograms.py);
  dfl_metrics_vs_rounds.png   Delta-FL runs' test accuracy and test-device error p90 and mean against rounds,
      one line per method (from the metrics.csv of run directories; experiments/convergence_curves.py);
  asr_vs_rounds.png   runs of a targeted attack (a backdoor): test accuracy and the attack success rate
      (eval/attack_success_rate) against rounds, one panel per task x attack x rho, one line per method;
  claims.md   whether RFA Fig. 2's claims (clean, omniscient, data corruption: FedAvg against RFA) and Delta-FL's
      (theta = 0.5 against FedAvg) hold in the runs: criterion, the paper's numbers, ours, verdict
      (experiments/paper_claims.py).
A file is written only when some input has runs of its kind. The table logic is experiments/paper_tables.py.
Runs are averaged over seeds only where they differ in nothing else: runs that differ in a recorded setting
(run_settings.json, summary.json) are reported apart, titled with what differs (experiments/setting_groups.py);
two runs of one cell with the same seed are refused, naming both.
"""

import os

from absl import app
from absl import flags

from experiments import convergence_curves
from experiments import device_histograms
from experiments import paper_claims
from experiments import paper_plots
from experiments import paper_tables
from tff_robust.command_line import finite_flags

_INPUTS = flags.DEFINE_list('inputs', [], 'Run directories, summary.json or [TASK=]results.csv files.')
_CSV_TASK = flags.DEFINE_string('csv_task', 'digits', 'Task of a results.csv given without TASK=.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', '/tmp/tff_robust_runs/paper_report', 'Output directory.')
_PUBLISHED = flags.DEFINE_string('published_numbers', paper_tables.PUBLISHED_PATH, 'JSON of published numbers.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  if not _INPUTS.value:
    raise app.UsageError('--inputs: give at least one run directory or results.csv')
  published = paper_tables.load_published(_PUBLISHED.value)
  try:  # everything that reads the runs, before any file is written
    records = paper_tables.load_records(_INPUTS.value, default_task=_CSV_TASK.value)
    kinds = {r.kind for r in records}
    rfa_text = paper_tables.rfa_tables(records, published) if 'rfa' in kinds else None
    dfl_text = paper_tables.dfl_tables(records, published) if 'dfl' in kinds else None
    verdicts = paper_claims.rfa_verdicts(records, published) + paper_claims.dfl_verdicts(records, published)
    curves = convergence_curves.load_curves(_INPUTS.value)
    convergence_curves.convergence_panels(curves)
    dfl_curves = {metric: convergence_curves.load_curves(_INPUTS.value, kind='dfl', metric=metric)
                  for metric in convergence_curves.DFL_METRICS}
    for metric_curves in dfl_curves.values():
      convergence_curves.convergence_panels(metric_curves)
    device_values, labels = device_histograms.load_from_runs(_INPUTS.value)
    backdoor_curves = convergence_curves.asr_curves(_INPUTS.value)
    for metric_curves in backdoor_curves.values():
      convergence_curves.convergence_panels(metric_curves)
  except (OSError, ValueError, KeyError) as error:
    raise app.UsageError(f'--inputs: {error}') from error
  if not records:
    raise app.UsageError(f'--inputs: no runs found in {_INPUTS.value}')
  os.makedirs(_OUTPUT_DIR.value, exist_ok=True)
  written = []
  if rfa_text is not None:
    with open(os.path.join(_OUTPUT_DIR.value, 'rfa_tables.md'), 'w') as f:
      f.write(rfa_text)
    written.append('rfa_tables.md')
    if paper_tables.rfa_accuracy_records(records):
      paper_plots.plot_rfa(records, published, os.path.join(_OUTPUT_DIR.value, 'rfa_accuracy_vs_corruption.png'))
      written.append('rfa_accuracy_vs_corruption.png')
    else:
      print('no RFA-kind run reports a final eval/accuracy: rfa_accuracy_vs_corruption.png not drawn')
  if curves:
    convergence_curves.plot_convergence(curves, os.path.join(_OUTPUT_DIR.value, 'rfa_accuracy_vs_calls.png'))
    written.append('rfa_accuracy_vs_calls.png')
  if dfl_text is not None:
    with open(os.path.join(_OUTPUT_DIR.value, 'dfl_tables.md'), 'w') as f:
      f.write(dfl_text)
    paper_plots.plot_dfl(records, os.path.join(_OUTPUT_DIR.value, 'dfl_test_device_error.png'))
    written += ['dfl_tables.md', 'dfl_test_device_error.png']
  if any(dfl_curves.values()):
    convergence_curves.plot_against_rounds(dfl_curves, convergence_curves.DFL_METRICS,
                                           os.path.join(_OUTPUT_DIR.value, 'dfl_metrics_vs_rounds.png'))
    written.append('dfl_metrics_vs_rounds.png')
  if backdoor_curves['eval/attack_success_rate']:
    convergence_curves.plot_against_rounds(backdoor_curves, convergence_curves.ASR_METRICS,
                                           os.path.join(_OUTPUT_DIR.value, 'asr_vs_rounds.png'))
    written.append('asr_vs_rounds.png')
  if verdicts:
    with open(os.path.join(_OUTPUT_DIR.value, 'claims.md'), 'w') as f:
      f.write(paper_claims.claims_markdown(verdicts))
    written.append('claims.md')
  if labels:
    device_histograms.plot_histograms(device_values, labels,
                                      os.path.join(_OUTPUT_DIR.value, 'dfl_device_histograms.png'))
    written.append('dfl_device_histograms.png')
  for name in written:
    if name.endswith('.md'):
      with open(os.path.join(_OUTPUT_DIR.value, name)) as f:
        print(f.read())
  print(f'{len(records)} runs; wrote {_OUTPUT_DIR.value}/: {", ".join(written)}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)
