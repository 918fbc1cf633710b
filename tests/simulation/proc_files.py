"""Reading Linux /proc for the worker tests: process trees, socket inodes and listening TCP sockets."""

import ipaddress
import os


def descendants(pid: int) -> list[int]:
  """Every living process below `pid` in the process tree (from each process's parent id in /proc)."""
  parents = {}
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      try:
        with open(f'/proc/{entry}/stat') as stat:
          parents[int(entry)] = int(stat.read().rsplit(')', 1)[1].split()[1])
      except (FileNotFoundError, ProcessLookupError):
        continue
  found, frontier = [], [pid]
  while frontier:
    children = [child for child, parent in parents.items() if parent in frontier]
    found += children
    frontier = children
  return found


def live_processes_of_session(session: int) -> list[int]:
  """Process ids of the processes of session `session` that are not zombies (from each process's /proc stat)."""
  found = []
  for entry in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{entry}/stat') as stat:
        state, _, _, process_session = stat.read().rsplit(')', 1)[1].split()[:4]
    except (FileNotFoundError, ProcessLookupError):
      continue
    if int(process_session) == session and state != 'Z':
      found.append(int(entry))
  return found


def command_name(pid: int) -> str:
  with open(f'/proc/{pid}/comm') as comm:
    return comm.read().strip()


def socket_inodes(pid: int) -> set[int]:
  """Inodes of the sockets open in process `pid`."""
  inodes = set()
  for fd in os.listdir(f'/proc/{pid}/fd'):
    try:
      target = os.readlink(f'/proc/{pid}/fd/{fd}')
    except FileNotFoundError:
      continue
    if target.startswith('socket:['):
      inodes.add(int(target[len('socket:['):-1]))
  return inodes


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
  """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) byte order."""
  raw = bytes.fromhex(hex_address)
  return ipaddress.ip_address(b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def listening_tcp_sockets(net_dir: str) -> dict[int, tuple]:
  """{inode: (address, port)} of the TCP sockets in state LISTEN of the network namespace of `net_dir`.

  `net_dir` is `/proc/self/net` (this process's namespace) or `/proc/PID/net` (process PID's namespace).
  """
  sockets = {}
  for table in ('tcp', 'tcp6'):
    with open(os.path.join(net_dir, table)) as lines:
      for line in list(lines)[1:]:
        fields = line.split()
        if fields[3] == '0A':  # TCP_LISTEN
          hex_address, hex_port = fields[1].split(':')
          sockets[int(fields[9])] = (_address(hex_address), int(hex_port, 16))
  return sockets


def is_loopback(address) -> bool:
  mapped = getattr(address, 'ipv4_mapped', None)
  return (mapped or address).is_loopback
