"""Side-by-side timing shared by the benchmarks: interleaved repeats, medians, one round per process."""

import statistics
import time


def interleaved_medians(calls: dict, repeats: int) -> dict:
  """Times each zero-argument callable `repeats` times, interleaved, after one untimed warm-up call each.

  Interleaving makes drift in machine load hit every callable alike, so ratios of the medians are fair.
  """
  for call in calls.values():
    call()
  seconds = {name: [] for name in calls}
  for _ in range(repeats):
    for name, call in calls.items():
      start = time.perf_counter()
      call()
      seconds[name].append(time.perf_counter() - start)
  return {name: statistics.median(values) for name, values in seconds.items()}


def round_time_medians(processes: dict, cohort: list, repeats: int) -> dict:
  """Median seconds of one `process.next` on the same cohort, per named learning process.

  Every process starts from the first process's initial model and keeps its own state across the rounds.
  """
  first = next(iter(processes.values()))
  initial_weights = first.get_model_weights(first.initialize())
  states = {name: process.set_model_weights(process.initialize(), initial_weights)
            for name, process in processes.items()}

  def run_round(name):
    def call():
      states[name] = processes[name].next(states[name], cohort).state
    return call

  return interleaved_medians({name: run_round(name) for name in processes}, repeats)
