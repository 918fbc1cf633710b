#!/usr/bin/env bash
# Makes a certificate authority and the certificates of a test cluster of TFF workers (mutual TLS, `openssl` only).
#
#   bash scripts/make_test_certificates.sh OUT_DIR [WORKER_NAME ...]
#
# WORKER_NAME: each host name or IP address the driver dials a worker by (--tff_worker_address=NAME:PORT); the
# workers' certificate holds them all (default: localhost 127.0.0.1). Writes
#   OUT_DIR/ca.pem, OUT_DIR/ca.key       the authority; keep ca.key off the cluster (it signs new members)
#   OUT_DIR/worker/{server.pem, server.key, client_ca.pem}
#       for each compute host: worker_service --tls_cert=server.pem --tls_key=server.key --tls_client_ca=client_ca.pem
#   OUT_DIR/driver/{ca.pem, client.pem, client.key}
#       for the driving machine: experiments.train --tff_worker_credentials=OUT_DIR/driver
# Keys are ECDSA P-256, certificates valid for 30 days; private keys are readable by their owner only. For a test
# cluster: a production deployment takes its certificates from its own authority.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 OUT_DIR [WORKER_NAME ...]" >&2
  exit 2
fi
out=$1
shift
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(localhost 127.0.0.1)
alt_names=""
for name in "${names[@]}"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then kind=IP; else kind=DNS; fi
  alt_names+="${alt_names:+,}$kind:$name"
done

umask 077
mkdir -p "$out/worker" "$out/driver"
# Files of an earlier run keep their mode when overwritten (cp, openssl -out), whatever the umask: remove them first.
rm -f "$out"/ca.{pem,key} "$out"/worker/{server.pem,server.key,client_ca.pem} "$out"/driver/{ca.pem,client.pem,client.key}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=30
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: NAME.key and NAME.pem, signed by the authority
sign() {
  key "$work/$1.key"
  openssl req -new -key "$work/$1.key" -subj "$2" -out "$work/$1.csr"
  printf '%s\n' "$3" > "$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" -CAcreateserial \
      -CAserial "$work/ca.srl" -days "$days" -sha256 -extfile "$work/$1.ext" -out "$work/$1.pem" 2>/dev/null
}

key "$out/ca.key"
openssl req -x509 -new -key "$out/ca.key" -subj "/CN=tff_robust test cluster CA" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$out/ca.pem"
leaf="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
authorityKeyIdentifier=keyid"
sign server "/CN=tff_robust worker" "$leaf
extendedKeyUsage=serverAuth
subjectAltName=$alt_names"
sign client "/CN=tff_robust driver" "$leaf
extendedKeyUsage=clientAuth"

cp "$work/server.pem" "$work/server.key" "$out/worker/"
cp "$out/ca.pem" "$out/worker/client_ca.pem"
cp "$work/client.pem" "$work/client.key" "$out/driver/"
cp "$out/ca.pem" "$out/driver/ca.pem"
chmod 644 "$out"/ca.pem "$out"/worker/*.pem "$out"/driver/*.pem
chmod 600 "$out"/ca.key "$out"/worker/server.key "$out"/driver/client.key
echo "certificates for ${names[*]} in $out: worker/ for each compute host, driver/ for the driving machine" >&2
