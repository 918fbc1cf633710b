"""The certificates of mutual TLS between the driver and its TFF workers, checked before anything uses them.

A worker (`worker_service --tls_cert=... --tls_key=... --tls_client_ca=...`) proves who it is with its certificate
and accepts only drivers whose certificate its client CA signed; the driver (`--tff_worker_credentials=DIR`, or
`set_remote_execution_context(..., credentials_dir=DIR)`) holds `ca.pem` (the authority that signed the workers'
certificates), `client.pem` and `client.key`. `scripts/make_test_certificates.sh` makes such a set for a test
cluster. Everything here is the standard library's `ssl` (OpenSSL): it reads the files once, so that a missing or
unreadable file, a file that is no certificate or key, an encrypted key or a key that does not match its
certificate is refused by the flag's name before a worker starts or a channel opens, not found at the first
connection. TLS 1.2 is the oldest version either side accepts (gRPC's own floor).

No TensorFlow and no gRPC here: `worker_service`, the worker launcher and the runner's flag checks use it.
"""

import dataclasses
import os
import ssl

SERVER_FLAGS = ('--tls_cert', '--tls_key', '--tls_client_ca')
CREDENTIALS_FLAG = '--tff_worker_credentials'
CA_FILE, CLIENT_CERT_FILE, CLIENT_KEY_FILE = 'ca.pem', 'client.pem', 'client.key'
HTTP2 = 'h2'  # gRPC runs over HTTP/2 and checks that TLS negotiated it (ALPN)


@dataclasses.dataclass(frozen=True)
class ClientCredentials:
  """The driver's PEM files' contents, as `grpc.ssl_channel_credentials` takes them; the key is left out of its
  repr (a log line, a debugger or a test's traceback would print it)."""
  root_certificates: bytes
  certificate_chain: bytes
  private_key: bytes = dataclasses.field(repr=False)


def _read(path: str, label: str) -> bytes:
  try:
    with open(path, 'rb') as pem:
      return pem.read()
  except OSError as error:
    raise ValueError(f'{label}: cannot read it ({error.strerror or error})') from None


def _refuse_encrypted_key():
  raise ValueError('encrypted')  # instead of OpenSSL's passphrase prompt on the terminal


def _check_certificates(context: ssl.SSLContext, path: str, label: str) -> None:
  """Loads the PEM certificates of `path` into `context` as trusted authorities; ValueError starting `label`."""
  _read(path, label)
  try:
    context.load_verify_locations(cafile=path)
  except ssl.SSLError as error:
    raise ValueError(f'{label}: holds no PEM certificate ({error.reason or error})') from None


def _load_key_pair(context: ssl.SSLContext, cert: str, key: str, cert_label: str, key_label: str) -> None:
  """`context.load_cert_chain(cert, key)` for a `cert` already checked; each failure a ValueError naming the key by
  `key_label` (and its certificate by `cert_label`)."""
  _read(key, key_label)
  try:
    context.load_cert_chain(cert, key, password=_refuse_encrypted_key)
  except ValueError:
    raise ValueError(f'{key_label}: the key is encrypted; give it unencrypted, readable by this user only') from None
  except ssl.SSLError as error:
    if error.reason == 'KEY_VALUES_MISMATCH':
      raise ValueError(f'{key_label} does not match {cert_label} (not the key of that certificate)') from None
    raise ValueError(f'{key_label}: holds no PEM private key ({error.reason or error})') from None


def server_context(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
  """The worker's TLS context: presents `cert` (with `key`), requires a client certificate signed by `client_ca`,
  negotiates HTTP/2. Raises ValueError naming the `--tls_*` flag of a file that cannot serve."""
  cert_flag, key_flag, ca_flag = SERVER_FLAGS
  context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
  context.minimum_version = ssl.TLSVersion.TLSv1_2
  _check_certificates(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert, f'{cert_flag}={cert}')
  _load_key_pair(context, cert, key, f'{cert_flag}={cert}', f'{key_flag}={key}')
  _check_certificates(context, client_ca, f'{ca_flag}={client_ca}')
  context.verify_mode = ssl.CERT_REQUIRED
  context.set_alpn_protocols([HTTP2])
  return context


def client_credentials(directory: str, name: str = CREDENTIALS_FLAG) -> ClientCredentials:
  """The driver's credentials in `directory` (`ca.pem`, `client.pem`, `client.key`), checked as the worker's are;
  ValueError naming `name` and the file."""
  if not os.path.isdir(directory):
    raise ValueError(f'{name}={directory}: not a directory (it must hold {CA_FILE}, {CLIENT_CERT_FILE} and '
                     f'{CLIENT_KEY_FILE}, e.g. the driver/ directory of scripts/make_test_certificates.sh)')
  ca, cert, key = (os.path.join(directory, file) for file in (CA_FILE, CLIENT_CERT_FILE, CLIENT_KEY_FILE))
  label = f'{name}={directory}:'
  context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
  _check_certificates(context, ca, f'{label} {CA_FILE}')
  _check_certificates(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), cert, f'{label} {CLIENT_CERT_FILE}')
  _load_key_pair(context, cert, key, CLIENT_CERT_FILE, f'{label} {CLIENT_KEY_FILE}')
  return ClientCredentials(*(_read(path, label) for path in (ca, cert, key)))
