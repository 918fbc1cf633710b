"""A small Sentiment140 in its real CSV format, prepared into a TFDS data_dir by TFDS's own builder."""

import csv
from unittest import mock

import tensorflow_datasets as tfds

WORDS = {'good': 4, 'great': 4, 'bad': 0, 'awful': 0}
# user -> tweets in the training CSV; 'erin' also has 2 neutral tweets and 'heidi' 1 positive tweet in the
# test CSV, so both reach 50 tweets only when the two files are grouped together.
TRAIN_COUNTS = {'alice': 50, 'bob': 63, 'carol': 120, 'dave': 49, 'erin': 48, 'frank': 55, 'grace': 5,
                 'heidi': 51}
KEPT = ['alice', 'bob', 'carol', 'erin', 'frank', 'heidi']
SPECIAL_TEXTS = ['---', "I'm SO good, really!! caf\xe9", ' '.join(['good'] * 40)]


def rows():
  """(training CSV rows, test CSV rows) as Sentiment140 has them: polarity, id, date, query, user, text."""
  train, index = [], 0
  for user, count in TRAIN_COUNTS.items():
    for i in range(count):
      word = list(WORDS)[(i * 7 + len(user)) % 4]
      text = SPECIAL_TEXTS[i] if user == 'alice' and i < 3 else f'{word} tweet {i} from {user} !'
      train.append([str(WORDS[word]), str(index), 'Mon Apr 06 22:19:45 PDT 2009', 'NO_QUERY', user, text])
      index += 1
  test = [['2', '1', 'd', 'q', 'erin', 'meh'], ['2', '2', 'd', 'q', 'erin', 'so so'],
          ['4', '3', 'd', 'q', 'heidi', 'great day'], ['0', '4', 'd', 'q', 'grace', 'bad day']]
  return train, test


def expected_devices():
  """{user: sorted [(text, label)]} of the kept users' binary-labelled tweets."""
  train, test = rows()
  devices = {user: [] for user in KEPT}
  for polarity, _, _, _, user, text in train + test:
    if user in devices and polarity != '2':
      devices[user].append((text, int(polarity == '4')))
  return {user: sorted(pairs) for user, pairs in devices.items()}


def prepare_data_dir(source_dir, data_dir) -> str:
  """Writes the CSV files to `source_dir` and has TFDS's 'sentiment140' builder prepare them in `data_dir`."""
  train, test = rows()
  for name, file_rows in (('training.1600000.processed.noemoticon.csv', train),
                          ('testdata.manual.2009.06.14.csv', test)):
    with open(f'{source_dir}/{name}', 'w', encoding='ISO-8859-1', newline='') as f:
      csv.writer(f, quoting=csv.QUOTE_ALL).writerows(file_rows)
  tfds.disable_progress_bar()
  with mock.patch.object(tfds.download.DownloadManager, 'download_and_extract', return_value=str(source_dir)):
    tfds.builder('sentiment140', data_dir=str(data_dir)).download_and_prepare()
  return str(data_dir)
