"""Another network namespace on this machine, joined to the host's network by a veth pair: "another host" for the
tests of who can reach a `worker_service`.

The namespace sees the host only at `host_address` (the host's end of the pair) and is seen from the host at
`peer_address`, as a host on a private link would be; the host's loopback is out of its reach, as another
machine's is. It takes iproute2 (`ip netns add`, `ip link add ... type veth`) and root.
"""

import contextlib
import ipaddress
import os
import random
import shutil
import subprocess


def unavailable_reason() -> str:
  """'' where these namespaces can be made, else why not (for a skip)."""
  if os.geteuid() != 0:
    return 'making a network namespace joined to the host (ip netns, veth) needs root'
  if shutil.which('ip') is None:
    return 'iproute2 (`ip`) is not installed'
  return ''


def _ip(*arguments: str) -> None:
  subprocess.run(['ip', *arguments], check=True, capture_output=True, text=True, timeout=30)


def _free_link() -> tuple[str, str]:
  """(host address, peer address) of a /30 in 10.213.0.0/16 that no interface of the host uses."""
  in_use = subprocess.run(['ip', '-4', '-o', 'addr'], check=True, capture_output=True, text=True).stdout
  while True:
    link = ipaddress.ip_network(f'10.213.{random.randrange(256)}.{4 * random.randrange(64)}/30')
    host, peer = (str(address) for address in link.hosts())
    if f' {host}/' not in in_use and f' {peer}/' not in in_use:
      return host, peer


class PeerNamespace:
  """A network namespace joined to the host by a veth pair; `run` and `popen` start commands inside it."""

  def __init__(self, name: str, host_address: str, peer_address: str):
    self.name, self.host_address, self.peer_address = name, host_address, peer_address

  def command(self, *command: str) -> list[str]:
    return ['ip', 'netns', 'exec', self.name, *command]

  def run(self, *command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(self.command(*command), capture_output=True, text=True, **kwargs)


@contextlib.contextmanager
def peer_namespace():
  """Yields a new `PeerNamespace`; deletes it (and its veth pair) after."""
  suffix = f'{random.getrandbits(32):08x}'
  name, host_link, peer_link = f'tff_robust_test_{suffix}', f'tfh{suffix}', f'tfp{suffix}'
  host_address, peer_address = _free_link()
  _ip('netns', 'add', name)
  try:
    _ip('link', 'add', host_link, 'type', 'veth', 'peer', 'name', peer_link)
    _ip('link', 'set', peer_link, 'netns', name)
    _ip('addr', 'add', f'{host_address}/30', 'dev', host_link)
    _ip('link', 'set', host_link, 'up')
    for arguments in (('addr', 'add', f'{peer_address}/30', 'dev', peer_link), ('link', 'set', peer_link, 'up'),
                      ('link', 'set', 'lo', 'up')):
      _ip('-n', name, *arguments)
    yield PeerNamespace(name, host_address, peer_address)
  finally:
    _ip('netns', 'del', name)  # deletes the veth pair with it, once its end is inside
    subprocess.run(['ip', 'link', 'del', host_link], capture_output=True, timeout=30)  # if it never got there
