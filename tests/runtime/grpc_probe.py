"""Calls a TFF executor service's `GetExecutor` once, as any gRPC client could, and prints how it ended as JSON.

  python -m tests.runtime.grpc_probe --address=HOST:PORT [--ca=PEM [--cert=PEM --key=PEM]]

Run inside another network namespace by the tests of who can reach a `worker_service`. Without --ca the call is
plain gRPC; with it, TLS trusting that CA, presenting the client certificate if given. An empty request is valid:
a worker that receives it answers (NOT_FOUND, no cardinalities), so any code but UNAVAILABLE or DEADLINE_EXCEEDED
means that the call reached TFF's executor service. Imports gRPC only, not TensorFlow.
"""

import argparse
import json

import grpc

_GET_EXECUTOR = '/tensorflow_federated.v0.ExecutorGroup/GetExecutor'


def _read(path):
  with open(path, 'rb') as pem:
    return pem.read()


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument('--address', required=True)
  parser.add_argument('--ca')
  parser.add_argument('--cert')
  parser.add_argument('--key')
  args = parser.parse_args()
  if args.ca is None:
    channel = grpc.insecure_channel(args.address)
  else:
    credentials = grpc.ssl_channel_credentials(
        _read(args.ca), _read(args.key) if args.key else None, _read(args.cert) if args.cert else None)
    channel = grpc.secure_channel(args.address, credentials)
  try:
    channel.unary_unary(_GET_EXECUTOR)(b'', timeout=10)
    code, details = grpc.StatusCode.OK, ''
  except grpc.RpcError as error:
    code, details = error.code(), error.details()
  print(json.dumps({'code': code.name, 'details': details}))


if __name__ == '__main__':
  main()
