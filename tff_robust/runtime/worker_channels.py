"""gRPC channels from the driver to TFF workers: plain, or mutual TLS with gRPC's own channel credentials.

A TLS channel (`credentials`, from `worker_tls.client_credentials`) presents the driver's client certificate and
accepts a worker only if the worker's certificate is signed by the driver's `ca.pem` and names the host the address
dials (gRPC checks both; `scripts/make_test_certificates.sh` takes those names). gRPC itself only retries a channel
whose handshake fails, and TFF waits for it without end, so `check_handshake` asks the channel why it is not ready
(a call of a method no worker serves, `_PROBE_METHOD`) and raises `WorkerCertificateError` with gRPC's reason when
TLS failed: the worker's certificate did not verify or names another host, or the worker closed the connection
during the handshake (its relay refused this driver's certificate, and logged it). The relay also closes a
connection whose handshake succeeded when its worker stays unreachable (`tls_relay`); the driver cannot tell that
close from a refusal, so the error names both and the relay's log says which. No TensorFlow here.
"""

import ipaddress
import re
from typing import Optional

import grpc

from tff_robust.runtime import worker_tls

GRPC_CHANNEL_OPTIONS = (
    ('grpc.max_send_message_length', 2 * 1000 * 1000 * 1000),
    ('grpc.max_receive_message_length', 2 * 1000 * 1000 * 1000),
)
_PROBE_METHOD = '/tff_robust.ConnectionCheck/Probe'
_PROBE_TIMEOUT_SECONDS = 2.0
_NOT_TLS = 'WRONG_VERSION_NUMBER'  # the peer answered the TLS client hello with something else
_OUR_CHECK_FAILED = ('Ssl handshake failed', 'Peer name', 'certificate')  # gRPC's words when the worker fails ours
# The relay closes a connection whose client certificate it refuses: gRPC sees the close, or a reset when the close
# found the client's first bytes unread (TLS 1.3: the client writes before the relay has checked its certificate).
_REFUSED_BY_WORKER = ('Socket closed', 'Connection reset by peer')


class WorkerCertificateError(ConnectionError):
  """Mutual TLS with a remote worker failed; the message names the worker's address and gRPC's reason."""


def is_loopback(address: str) -> bool:
  """Whether `address` (`host:port`, `[v6]:port`, gRPC's `dns:`, `dns:///`, `ipv4:`, `ipv6:` forms, `unix:PATH`)
  stays on this host: a Unix socket, `localhost`, or a loopback IP (127.0.0.0/8, ::1). Names are not resolved: any
  other name is not."""
  if address.startswith(('unix:', 'unix-abstract:')):
    return True
  address = re.sub(r'^(dns:(//[^/]*/)?|ipv4:|ipv6:)', '', address)
  host = address.rsplit(':', 1)[0].strip('[]')
  if host.lower() == 'localhost':
    return True
  try:
    return ipaddress.ip_address(host).is_loopback
  except ValueError:
    return False


def open_channel(address: str, credentials: Optional[worker_tls.ClientCredentials] = None) -> grpc.Channel:
  """A channel to the worker at `address` (`host:port`, or `unix:PATH` without TLS); TLS with `credentials`."""
  if credentials is None:
    return grpc.insecure_channel(address, GRPC_CHANNEL_OPTIONS)
  return grpc.secure_channel(address, grpc.ssl_channel_credentials(
      root_certificates=credentials.root_certificates, private_key=credentials.private_key,
      certificate_chain=credentials.certificate_chain), GRPC_CHANNEL_OPTIONS)


def connection_failure(channel: grpc.Channel) -> Optional[str]:
  """gRPC's reason why `channel` cannot connect (its last error), or None if it connects."""
  try:
    channel.unary_unary(_PROBE_METHOD)(b'', timeout=_PROBE_TIMEOUT_SECONDS)
  except grpc.RpcError as error:
    if error.code() == grpc.StatusCode.UNAVAILABLE:
      return error.details() or 'UNAVAILABLE'
  return None  # UNIMPLEMENTED: a worker answered


def check_handshake(channel: grpc.Channel, address: str) -> None:
  """Raises `WorkerCertificateError` if the TLS `channel` to `address` fails its handshake, naming why; returns
  when it connects or fails for another reason (e.g. nothing listens yet), which the caller waits out."""
  details = connection_failure(channel) or ''
  if _NOT_TLS in details:
    raise WorkerCertificateError(f'the TFF worker at {address} does not speak TLS ({details}): start its '
                                 'worker_service with --tls_cert, --tls_key and --tls_client_ca')
  if any(words in details for words in _OUR_CHECK_FAILED):
    raise WorkerCertificateError(
        f'the TFF worker at {address} failed this driver\'s TLS check ({details}): its certificate must be signed by '
        f'{worker_tls.CA_FILE} and name the host of the address')
  if any(words in details for words in _REFUSED_BY_WORKER):
    raise WorkerCertificateError(
        f'the TFF worker at {address} closed the connection during the TLS handshake ({details}): it refused this '
        f'driver\'s {worker_tls.CLIENT_CERT_FILE}, not signed by the authority of its --tls_client_ca, or its '
        'worker_service could not reach its own worker for 60 s after the handshake (its log says which)')
