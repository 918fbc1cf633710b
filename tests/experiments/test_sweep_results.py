"""`sweep_results`: results.csv rows appended and read back; a file written before the targeted attacks' columns
is read with '' there and rewritten with the full header at the next append (an older sweep resumes)."""

import csv

from experiments import sweep_results

_OLD_HEADER = 'algorithm,corruption,fraction,seed,accuracy,loss,calls_per_round,corruption_weight_share'


def test_an_older_file_resumes_and_gains_the_new_columns(tmp_path):
  (tmp_path / 'results.csv').write_text(f'{_OLD_HEADER}\nfedavg,none,0.0,0,0.93,0.25,1.0,0.0\n')
  [old] = sweep_results.read_finished(str(tmp_path))
  assert sweep_results.run_key(old) == ('fedavg', 'none', 0.0, 0) and old['accuracy'] == 0.93
  assert old['attack_success_rate'] == '' and old['accuracy_at_attack_end'] == ''
  new = dict(algorithm='fedavg', corruption='backdoor', fraction=0.1, seed=0, accuracy=0.9, loss=0.3,
             calls_per_round=1.0, corruption_weight_share=0.11, attack_success_rate=0.75, rounds_after_attack='',
             attack_end_round='', accuracy_at_attack_end='', attack_success_rate_at_attack_end='')
  sweep_results.append(str(tmp_path), new)
  with open(tmp_path / 'results.csv', newline='') as f:
    reader = csv.DictReader(f)
    rows = list(reader)
  assert tuple(reader.fieldnames) == sweep_results.FIELDS
  assert [(r['corruption'], r['accuracy'], r['attack_success_rate']) for r in rows] == [
      ('none', '0.93', ''), ('backdoor', '0.9', '0.75')]
  assert [r['fraction'] for r in sweep_results.read_finished(str(tmp_path))] == [0.0, 0.1]
