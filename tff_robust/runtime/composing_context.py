"""Runs any TFF computation over the cohort split across several TFF workers, every pass on all of them at once.

TFF's `MergeableCompExecutionContext` splits a computation at one aggregation; a round of RFA, Delta-FL or Fed+
has several that depend on one another (a Weiszfeld pass needs the previous pass's median). This context
evaluates the computation itself over TFF's own pieces: the computation, compiled for simulation, is put in
call-dominant form (`tff.framework.to_call_dominant`: a block of locals, each the call of an intrinsic or a
compiled TensorFlow computation), and the locals are evaluated in order, each run of consecutive locals with the
same placement (below) as one call of a lambda made of them, so that a round takes a few calls per aggregation
pass, not one per local. On one worker every local has the same placement: the round is one call, as on TFF's
own context.

Where values live. The cohort of n clients is split into contiguous shards of sizes floor(n/N) or ceil(n/N),
one per worker (`tff.framework.RemoteExecutor` with cardinality CLIENTS = the shard's size). A CLIENTS-placed
value is one remote value per shard, created and kept on that shard's worker for the whole invocation (the
client updates of a round stay on the workers across its passes; they never come back through Python). A
SERVER-placed or unplaced value lives on the first worker ("home") and is copied to another worker only when
a call there needs it (a broadcast, an aggregation's zero).

What runs where:
  - `federated_map`, `federated_map_all_equal`, `federated_zip_at_clients`, `federated_broadcast`,
    `federated_value_at_clients`, `federated_eval_at_clients`, `federated_select`, `federated_secure_select`
    (each client's result depends on that client's keys and on server values only): the same call on every
    shard, at once;
  - `federated_apply`, `federated_zip_at_server`, `federated_value_at_server`, `federated_eval_at_server` and
    compiled computations: on home;
  - `federated_aggregate(v, zero, accumulate, merge, report)`: every shard s computes its partial accumulator
    a_s = fold(accumulate, zero, its clients' v) at once; home merges them, a = merge(...merge(a_1, a_2)..., a_N)
    and reports report(a), in one call (home's own a_1 stays there; the others are copied). This is TFF's own
    definition of the aggregate, with the clients' fold split in N contiguous parts: a sum is the sum of the
    shards' sums, and a weighted mean (accumulator (sum w x, sum w)) is divided once, after the merge, so a
    shard whose weights are all zero adds nothing and the no-NaN division of the mean factories sees the whole
    cohort's weight. Secure sums are compiled to
    their insecure bodies first (as on one worker), so they are aggregates too.
A computation that calls any other intrinsic is refused before anything runs: `UnsupportedIntrinsicError`
names it (`check_supported` says so ahead of a run).

A worker that cannot be reached (gRPC UNAVAILABLE) fails the computation at once with `WorkerUnavailable`
naming it; TFF's own contexts would retry without limit.

Concurrency. TFF's gRPC stub blocks inside its coroutines, so each worker gets a thread of its own with an event
loop; a call on every shard is submitted to every worker's thread, and the workers compute at once. The same
code runs one worker (one shard) and N.

Why one module of ~580 lines: it is one evaluator of TFF's call-dominant form (splitting a computation into runs
of one placement, evaluating each on every worker at once, merging the partial aggregates); its parts share the
evaluator's environment of values and handles, and are only meaningful together.
"""

import asyncio
import concurrent.futures
import threading
from typing import Any, Optional, Sequence

import tensorflow_federated as tff

_PER_SHARD_INTRINSICS = frozenset({
    'federated_map', 'federated_map_all_equal', 'federated_zip_at_clients', 'federated_broadcast',
    'federated_value_at_clients', 'federated_eval_at_clients', 'federated_select', 'federated_secure_select',
})
_HOME_INTRINSICS = frozenset({
    'federated_apply', 'federated_zip_at_server', 'federated_value_at_server', 'federated_eval_at_server',
})
_AGGREGATE = 'federated_aggregate'
SUPPORTED_INTRINSICS = _PER_SHARD_INTRINSICS | _HOME_INTRINSICS | {_AGGREGATE}


class UnsupportedIntrinsicError(ValueError):
  """A computation calls an intrinsic that the composing context cannot split over workers."""


class WorkerUnavailable(RuntimeError):
  """A TFF worker could not be reached during a computation (it stopped, or the connection to it broke)."""


def shard_sizes(num_clients: int, num_workers: int) -> list[int]:
  """Contiguous shard sizes, floor or ceil of num_clients / num_workers, without empty shards (at least one)."""
  base, extra = divmod(num_clients, num_workers)
  sizes = [base + (index < extra) for index in range(num_workers)]
  return [size for size in sizes if size] or [0]


class _WorkerThread:
  """One worker's thread, with its own event loop, in which every call to that worker runs."""

  def __init__(self, stub, name: str):
    self.stub = stub
    self.name = name
    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix='tff_composing')
    self._local = threading.local()

  def submit(self, function, *args) -> concurrent.futures.Future:
    """Runs `function(*args)` in this worker's thread; an unreachable worker fails it with WorkerUnavailable."""
    return self._pool.submit(self._call, function, *args)

  def _call(self, function, *args):
    try:
      return function(*args)
    except tff.framework.RetryableError as error:  # gRPC UNAVAILABLE: TFF's own context would retry forever
      raise WorkerUnavailable(
          f'the TFF worker {self.name} became unreachable during a computation (gRPC UNAVAILABLE); a computation '
          'is not retried on the composing context'
      ) from error

  def run(self, coroutine):
    """Runs a coroutine of `RemoteExecutor` to completion; called in this worker's thread only."""
    loop = getattr(self._local, 'loop', None)
    if loop is None:
      loop = self._local.loop = asyncio.new_event_loop()
    return loop.run_until_complete(coroutine)


class _Shard:
  """A shard of the cohort: a worker thread and a `RemoteExecutor` there with CLIENTS = the shard's size."""

  def __init__(self, worker: _WorkerThread, num_clients: int):
    self.worker = worker
    self.num_clients = num_clients
    self.executor = tff.framework.RemoteExecutor(worker.stub)

  def open(self):
    self.executor.set_cardinalities({tff.CLIENTS: self.num_clients})

  def create_value(self, value, type_spec):
    return self.worker.run(self.executor.create_value(value, type_spec))

  def create_call(self, function, argument=None):
    return self.worker.run(self.executor.create_call(function, argument))

  def create_struct(self, elements):
    return self.worker.run(self.executor.create_struct(elements))

  def create_selection(self, source, index):
    return self.worker.run(self.executor.create_selection(source, index))

  def compute(self, remote_value):
    return self.worker.run(remote_value.compute())


_UNKNOWN = object()


class _HomeValue:
  """A SERVER-placed or unplaced value: remote on some shards (by index), and/or known in Python."""

  def __init__(self, type_signature, *, python=_UNKNOWN, remotes=None):
    self.type_signature = type_signature
    self.python = python
    self.remotes = dict(remotes or {})


class _ClientsValue:
  """A CLIENTS-placed value: one remote value on every shard (each the shard's clients' members)."""

  def __init__(self, type_signature, remotes: list):
    self.type_signature = type_signature
    self.remotes = remotes


class _Function:
  """A function building block (compiled computation, intrinsic, lambda) passed as an argument."""

  def __init__(self, block):
    self.block = block
    self.type_signature = block.type_signature


def _leaves(tree, kind: type) -> list:
  """The values of class `kind` (`_HomeValue` or `_ClientsValue`) in a tree of values and `Struct`s."""
  if isinstance(tree, kind):
    return [tree]
  if isinstance(tree, tff.structure.Struct):
    return [leaf for element in tree for leaf in _leaves(element, kind)]
  return []


def _each(futures):
  return [future.result() for future in futures]


def _placement(local, single_shard: bool) -> str:
  """Where a call-dominant local runs: 'shards' (every shard), 'home', or federated_aggregate's own merge."""
  function = getattr(local, 'function', None)
  if single_shard:
    return 'shards'  # one shard is the whole cohort: every call runs there as it is
  if isinstance(function, tff.framework.Intrinsic):
    if function.uri in _PER_SHARD_INTRINSICS:
      return 'shards'
    if function.uri == _AGGREGATE:
      return _AGGREGATE
  return 'home'


def _segments(locals_, single_shard: bool):
  """The locals in runs of consecutive locals of one placement: [(placement, [(name, local), ...]), ...]."""
  segments = []
  for name, local in locals_:
    placement = _placement(local, single_shard)
    if segments and segments[-1][0] == placement and placement != _AGGREGATE:
      segments[-1][1].append((name, local))
    else:
      segments.append((placement, [(name, local)]))
  return segments


def _free_references(block, bound: frozenset = frozenset()) -> dict:
  """{name: type} of the references in `block` that it does not bind itself (in order of appearance)."""
  if isinstance(block, tff.framework.Reference):
    return {} if block.name in bound else {block.name: block.type_signature}
  if isinstance(block, tff.framework.Lambda):
    return _free_references(block.result, bound | {block.parameter_name})
  free = {}
  if isinstance(block, tff.framework.Block):
    for name, local in block.locals:
      free.update(_free_references(local, bound))
      bound = bound | {name}
    free.update(_free_references(block.result, bound))
    return free
  for child in block.children():
    free.update(_free_references(child, bound))
  return free


def _references_used_later(block) -> list[set[str]]:
  """For each local i of `block`, the names that locals after i or the block's result refer to."""
  used = set(_free_references(block.result))
  used_later = [set() for _ in block.locals]
  for index in range(len(block.locals) - 1, -1, -1):
    used_later[index] = set(used)
    used |= set(_free_references(block.locals[index][1]))
  return used_later


class _Invocation:
  """The evaluation of one call-dominant computation on a list of shards (shard 0 is home)."""

  def __init__(self, shards: Sequence[_Shard]):
    self.shards = list(shards)
    _each([shard.worker.submit(shard.open) for shard in self.shards])

  def close(self):
    _each([shard.worker.submit(shard.executor.close) for shard in self.shards])

  # Values: getting them onto a shard, and into Python.

  def _fetch(self, values: list[_HomeValue]) -> None:
    """Makes every value's Python form known, fetching them from their shards at once."""
    pending = [(value, next(iter(value.remotes.items()))) for value in values if value.python is _UNKNOWN]
    futures = [self.shards[index].worker.submit(self.shards[index].compute, remote)
               for _, (index, remote) in pending]
    for (value, _), python in zip(pending, _each(futures)):
      value.python = python

  def _on_shard(self, tree, index: int):
    """The remote value of `tree` on shard `index` (called in that shard's thread)."""
    shard = self.shards[index]
    if isinstance(tree, _ClientsValue):
      return tree.remotes[index]
    if isinstance(tree, _HomeValue):
      if index not in tree.remotes:
        tree.remotes[index] = shard.create_value(tree.python, tree.type_signature)
      return tree.remotes[index]
    if isinstance(tree, _Function):
      return shard.create_value(tree.block.proto, tree.type_signature)
    elements = [(name, self._on_shard(element, index)) for name, element in tff.structure.iter_elements(tree)]
    return shard.create_struct(tff.structure.Struct(elements))

  def _prepare(self, tree, indices) -> None:
    """Fetches into Python the home values in `tree` that a shard among `indices` lacks."""
    self._fetch([leaf for leaf in _leaves(tree, _HomeValue) if any(i not in leaf.remotes for i in indices)])

  def _call_on(self, function_block, argument, indices):
    """Calls `function_block(argument)` on the shards `indices` at once; returns their remote results."""
    self._prepare(argument, indices)

    def call(index):
      shard = self.shards[index]
      function = shard.create_value(function_block.proto, function_block.type_signature)
      return shard.create_call(function, None if argument is None else self._on_shard(argument, index))

    return _each([self.shards[index].worker.submit(call, index) for index in indices])

  def materialize(self, tree):
    """The Python value of `tree` (CLIENTS values: the shards' lists, concatenated in cohort order)."""
    home = _leaves(tree, _HomeValue)
    clients = _leaves(tree, _ClientsValue)
    self._fetch(home)
    fetched = {}
    futures = {(id(value), index): self.shards[index].worker.submit(self.shards[index].compute, remote)
               for value in clients for index, remote in enumerate(value.remotes)}
    for key, future in futures.items():
      fetched[key] = future.result()
    return self._python(tree, fetched)

  def _python(self, tree, fetched):
    if isinstance(tree, _HomeValue):
      return tree.python
    if isinstance(tree, _ClientsValue):
      parts = [fetched[(id(tree), index)] for index in range(len(tree.remotes))]
      if tree.type_signature.all_equal:
        return parts[0]
      return [member for part in parts for member in part]
    return tff.structure.Struct(
        [(name, self._python(element, fetched)) for name, element in tff.structure.iter_elements(tree)]
    )

  # Ingesting the argument.

  def ingest(self, argument, type_spec):
    """The argument as a tree of values: CLIENTS lists split into the shards, the rest kept in Python."""
    if isinstance(type_spec, tff.StructType):
      argument = tff.structure.from_container(argument)
      return tff.structure.Struct([
          (name, self.ingest(element, element_type))
          for (name, element), (_, element_type) in zip(
              tff.structure.iter_elements(argument), tff.structure.iter_elements(type_spec))
      ])
    if isinstance(type_spec, tff.FederatedType) and type_spec.placement is tff.CLIENTS:
      if type_spec.all_equal:
        parts = [argument] * len(self.shards)
      else:
        members, parts, start = list(argument), [], 0
        for shard in self.shards:
          parts.append(members[start:start + shard.num_clients])
          start += shard.num_clients
      futures = [shard.worker.submit(shard.create_value, part, type_spec)
                 for shard, part in zip(self.shards, parts)]
      return _ClientsValue(type_spec, _each(futures))
    return _HomeValue(type_spec, python=argument)

  # Evaluating the call-dominant block.

  def evaluate(self, lambda_block, argument_tree):
    """Evaluates the call-dominant `lambda_block` on `argument_tree`, one segment of its locals per call."""
    environment = {}
    if lambda_block.parameter_name is not None:
      environment[lambda_block.parameter_name] = argument_tree
    block = lambda_block.result
    if not isinstance(block, tff.framework.Block):  # a computation without locals
      return self._expression(block, environment)
    used_later = _references_used_later(block)
    start = 0
    for placement, locals_ in _segments(block.locals, single_shard=len(self.shards) == 1):
      end = start + len(locals_)
      if placement == _AGGREGATE or len(locals_) == 1:
        for name, local in locals_:
          environment[name] = self._expression(local, environment)
      else:
        self._run_segment(locals_, used_later[end - 1], placement, environment)
      start = end
    return self._expression(block.result, environment)

  def _run_segment(self, locals_, used_later: set[str], placement: str, environment) -> None:
    """Runs consecutive locals of one placement as one call on their shards: a lambda whose parameter holds the
    values they read from earlier locals, and whose result holds those of their values that later ones read."""
    defined = {name for name, _ in locals_}
    free = {}
    for name, local in locals_:
      free.update({ref: ref_type for ref, ref_type in _free_references(local).items() if ref not in defined})
    free_names = list(free)
    live = [(name, local.type_signature) for name, local in locals_ if name in used_later]
    parameter_type = tff.StructType([(None, free[name]) for name in free_names]) if free_names else None
    parameter = 'segment_argument'
    bindings = [(name, tff.framework.Selection(tff.framework.Reference(parameter, parameter_type), index=index))
                for index, name in enumerate(free_names)]
    result = tff.framework.Struct([(None, tff.framework.Reference(name, local_type)) for name, local_type in live])
    segment = tff.framework.Lambda(parameter if free_names else None, parameter_type,
                                   tff.framework.Block(bindings + list(locals_), result))
    argument = (tff.structure.Struct([(None, environment[name]) for name in free_names]) if free_names else None)
    indices = [0] if placement == 'home' else list(range(len(self.shards)))
    results = self._call_on(segment, argument, indices)

    def select(index, position):
      return self.shards[index].create_selection(results[indices.index(index)], position)

    for position, (name, local_type) in enumerate(live):
      remotes = _each([self.shards[index].worker.submit(select, index, position) for index in indices])
      if isinstance(local_type, tff.FederatedType) and local_type.placement is tff.CLIENTS:
        environment[name] = _ClientsValue(local_type, remotes)
      else:
        environment[name] = _HomeValue(local_type, remotes=dict(zip(indices, remotes)))

  def _expression(self, block, environment):
    if isinstance(block, tff.framework.Reference):
      return environment[block.name]
    if isinstance(block, tff.framework.Selection):
      return self._select(self._expression(block.source, environment), block.as_index())
    if isinstance(block, tff.framework.Struct):
      return tff.structure.Struct(
          [(name, self._expression(element, environment)) for name, element in tff.structure.iter_elements(block)]
      )
    if isinstance(block, (tff.framework.CompiledComputation, tff.framework.Intrinsic, tff.framework.Lambda)):
      return _Function(block)
    if isinstance(block, tff.framework.Call):
      return self._local(block, environment)
    if isinstance(block, tff.framework.Literal):
      return _HomeValue(block.type_signature, python=block.value)
    raise TypeError(f'the composing context cannot evaluate a {type(block).__name__} building block: {block}')

  def _select(self, source, index: int):
    if isinstance(source, tff.structure.Struct):
      return source[index]
    if not isinstance(source, _HomeValue):
      raise TypeError(f'selection [{index}] from a value of type {source.type_signature}')
    element_type = source.type_signature[index]
    if source.python is not _UNKNOWN:
      return _HomeValue(element_type, python=tff.structure.from_container(source.python)[index])
    futures = {i: self.shards[i].worker.submit(self.shards[i].create_selection, remote, index)
               for i, remote in source.remotes.items()}
    return _HomeValue(element_type, remotes={i: future.result() for i, future in futures.items()})

  def _local(self, call, environment):
    if not isinstance(call, tff.framework.Call):
      raise TypeError(f'a call-dominant local is not a call: {call}')
    function = call.function
    argument = None if call.argument is None else self._expression(call.argument, environment)
    if isinstance(function, tff.framework.CompiledComputation):
      (result,) = self._call_on(function, argument, [0])
      return _HomeValue(call.type_signature, remotes={0: result})
    if not isinstance(function, tff.framework.Intrinsic):
      raise TypeError(f'the composing context calls only intrinsics and compiled computations, not {function}')
    if function.uri in _PER_SHARD_INTRINSICS:
      results = self._call_on(function, argument, range(len(self.shards)))
      return _ClientsValue(call.type_signature, results)
    if function.uri in _HOME_INTRINSICS:
      (result,) = self._call_on(function, argument, [0])
      return _HomeValue(call.type_signature, remotes={0: result})
    if function.uri == _AGGREGATE:
      return self._aggregate(function, argument)
    raise UnsupportedIntrinsicError(f'the intrinsic {function.uri} cannot run on the composing context')

  def _aggregate(self, intrinsic, argument):
    """federated_aggregate: partial accumulators on every shard at once, merged and reported on home.

    Two calls: `federated_aggregate(value, zero, accumulate, merge, identity)` on every shard, then on home
    `federated_apply(a -> report(merge(...merge(a_1, a_2)..., a_N)), federated_zip_at_server(a_1, ..., a_N))`;
    home's own partial a_1 never leaves it, the others are copied there.
    """
    value, zero, accumulate, merge, report = argument
    value_type, accumulator_type, accumulate_type, merge_type, report_type = intrinsic.type_signature.parameter
    for function in (accumulate, merge, report):
      if not isinstance(function, _Function):
        raise TypeError(f'federated_aggregate takes its functions inline in call-dominant form, got {function}')
    at_server = tff.FederatedType(accumulator_type, tff.SERVER)
    pair_type = tff.StructType([(None, value_type), (None, accumulator_type)])
    pair = tff.framework.Reference('value_and_zero', pair_type)
    identity = tff.framework.Lambda(
        'accumulator', accumulator_type, tff.framework.Reference('accumulator', accumulator_type))
    partial_aggregate = tff.framework.Intrinsic(
        _AGGREGATE, tff.FunctionType([value_type, accumulator_type, accumulate_type, merge_type,
                                      identity.type_signature], at_server))
    partial = tff.framework.Lambda('value_and_zero', pair_type, tff.framework.Call(
        partial_aggregate, tff.framework.Struct([
            (None, tff.framework.Selection(pair, index=0)), (None, tff.framework.Selection(pair, index=1)),
            (None, accumulate.block), (None, merge.block), (None, identity)])))
    partials = self._call_on(partial, tff.structure.Struct([(None, value), (None, zero)]),
                             range(len(self.shards)))

    num_parts = len(partials)
    parts_type = tff.StructType([(None, at_server)] * num_parts)
    accumulators_type = tff.StructType([(None, accumulator_type)] * num_parts)
    accumulators = tff.framework.Reference('accumulators', accumulators_type)
    merged = tff.framework.Selection(accumulators, index=0)
    for index in range(1, num_parts):
      merged = tff.framework.Call(merge.block, tff.framework.Struct(
          [(None, merged), (None, tff.framework.Selection(accumulators, index=index))]))
    merge_and_report = tff.framework.Lambda(
        'accumulators', accumulators_type, tff.framework.Call(report.block, merged))
    zip_at_server = tff.framework.Intrinsic('federated_zip_at_server', tff.FunctionType(
        parts_type, tff.FederatedType(accumulators_type, tff.SERVER)))
    result_type = tff.FederatedType(report_type.result, tff.SERVER)
    apply = tff.framework.Intrinsic('federated_apply', tff.FunctionType(
        [merge_and_report.type_signature, tff.FederatedType(accumulators_type, tff.SERVER)], result_type))
    parts = tff.framework.Reference('parts', parts_type)
    finish = tff.framework.Lambda('parts', parts_type, tff.framework.Call(apply, tff.framework.Struct([
        (None, merge_and_report), (None, tff.framework.Call(zip_at_server, parts))])))
    part_values = [_HomeValue(at_server, remotes={index: remote}) for index, remote in enumerate(partials)]
    return self._home_call(finish, tff.structure.Struct([(None, part) for part in part_values]))

  def _home_call(self, function_block, argument) -> _HomeValue:
    (result,) = self._call_on(function_block, argument, [0])
    return _HomeValue(function_block.type_signature.result, remotes={0: result})


def called_intrinsics(lambda_block) -> set[str]:
  """The URIs of the intrinsics that the locals of a call-dominant lambda call."""
  block = lambda_block.result
  locals_ = block.locals if isinstance(block, tff.framework.Block) else []
  return {local.function.uri for _, local in locals_
          if isinstance(local, tff.framework.Call) and isinstance(local.function, tff.framework.Intrinsic)}


def _call_dominant_form(computation, compiler_fn):
  """`computation` compiled by `compiler_fn` in call-dominant form; UnsupportedIntrinsicError if it calls an
  intrinsic that this context cannot split over workers."""
  compiled = compiler_fn(computation)
  if hasattr(compiled, 'to_building_block'):
    compiled = compiled.to_building_block()
  lambda_block = tff.framework.to_call_dominant(compiled)
  if not isinstance(lambda_block, tff.framework.Lambda):  # a TensorFlow computation: one call of it, on home
    parameter_type = lambda_block.type_signature.parameter
    if parameter_type is None:
      lambda_block = tff.framework.Lambda(None, None, tff.framework.Call(lambda_block))
    else:
      lambda_block = tff.framework.Lambda('argument', parameter_type, tff.framework.Call(
          lambda_block, tff.framework.Reference('argument', parameter_type)))
  unsupported = called_intrinsics(lambda_block) - SUPPORTED_INTRINSICS
  if unsupported:
    raise UnsupportedIntrinsicError(
        f'{", ".join(sorted(unsupported))} cannot run over TFF workers: the composing context evaluates only '
        f'{", ".join(sorted(SUPPORTED_INTRINSICS))} (after compilation for simulation)'
    )
  return lambda_block


def check_supported(computation, compiler_fn) -> None:
  """Raises UnsupportedIntrinsicError, naming the intrinsic, if `ComposingContext` cannot run `computation`."""
  _call_dominant_form(computation, compiler_fn)


def _client_count(argument, type_spec) -> Optional[int]:
  """The length of the CLIENTS-placed (not all-equal) lists in `argument`, or None if it has none."""
  if isinstance(type_spec, tff.StructType):
    counts = {_client_count(element, element_type)
              for (_, element), (_, element_type) in zip(
                  tff.structure.iter_elements(tff.structure.from_container(argument)),
                  tff.structure.iter_elements(type_spec))}
    counts.discard(None)
    if len(counts) > 1:
      raise ValueError(f'the CLIENTS-placed arguments have different numbers of clients: {sorted(counts)}')
    return counts.pop() if counts else None
  if isinstance(type_spec, tff.FederatedType) and type_spec.placement is tff.CLIENTS and not type_spec.all_equal:
    return len(argument)
  return None


class ComposingContext(tff.framework.SyncContext):
  """Runs computations over the workers behind `stubs` (`tff.framework.RemoteExecutorGrpcStub`s), the cohort
  split into one shard per worker; see the module docstring. `compiler_fn` compiles a computation for
  simulation (a `tff.framework.ConcreteComputation` or building block out)."""

  def __init__(self, stubs: Sequence[Any], compiler_fn, *, default_num_clients: int = 0,
               worker_names: Optional[Sequence[str]] = None):
    """`worker_names`: how errors name the workers (e.g. their addresses); default 'number i of N'."""
    if not stubs:
      raise ValueError('stubs must hold at least one TFF worker stub')
    if worker_names is None:
      worker_names = [f'number {index + 1} of {len(stubs)}' for index in range(len(stubs))]
    if len(worker_names) != len(stubs):
      raise ValueError(f'worker_names must name each of the {len(stubs)} stubs, got {len(worker_names)} names')
    self._workers = [_WorkerThread(stub, name) for stub, name in zip(stubs, worker_names)]
    self._compiler_fn = compiler_fn
    self._default_num_clients = default_num_clients
    self._compiled = {}  # id(computation) -> (computation, call-dominant lambda)

  def _call_dominant(self, computation):
    cached = self._compiled.get(id(computation))
    if cached is None or cached[0] is not computation:
      cached = self._compiled[id(computation)] = (computation, _call_dominant_form(computation, self._compiler_fn))
    return cached[1]

  def invoke(self, comp, arg=None):
    """Runs `comp` on `arg` across the workers: the cohort split into contiguous shards, per-client work and every
    aggregation pass on all workers at once, partial accumulators merged on the first (the class docstring)."""
    lambda_block = self._call_dominant(comp)
    parameter_type = lambda_block.parameter_type
    if arg is not None:
      arg = tff.tensorflow.transform_args(arg)
    num_clients = None if arg is None else _client_count(arg, parameter_type)
    if num_clients is None:
      num_clients = self._default_num_clients
    sizes = shard_sizes(num_clients, len(self._workers))
    invocation = _Invocation([_Shard(worker, size) for worker, size in zip(self._workers, sizes)])
    try:
      argument_tree = None if arg is None else invocation.ingest(arg, parameter_type)
      result = invocation.materialize(invocation.evaluate(lambda_block, argument_tree))
    finally:
      invocation.close()
    if isinstance(comp.type_signature.result, tff.StructType) and isinstance(result, (dict, list, tuple)):
      result = tff.structure.from_container(result, recursive=True)
    result = tff.types.type_to_py_container(result, comp.type_signature.result)
    return tff.tensorflow.transform_result(result)
