#!/usr/bin/env bash
# Creates the files the Kustomize base turns into Secrets (secretGenerator in
# base/kustomization.yaml): a CA, a coordinator certificate, one worker
# certificate shared by every worker pod, and a random job token.
#
# Usage: deploy/k8s/make-secrets.sh [--namespace NS] [--cluster-domain D]
#                                   [--days N] [--force] [OUTDIR]
#
# OUTDIR (default: base/secrets next to this script; gitignored) receives
#   ca.crt ca.key                 the CA (ca.key never goes into the cluster:
#                                 keep it to issue more certificates)
#   coordinator.crt/.key          SANs lockstep-coordinator, .NS, .NS.svc,
#                                 .NS.svc.D, localhost, 127.0.0.1 (the last
#                                 two for `kubectl port-forward`)
#   worker.crt/.key               SAN *.lockstep-worker.NS.svc.D: each pod's
#                                 --advertise name; serverAuth + clientAuth
#   token                         the bearer token for job commands
# The certificates name the namespace: make them again (--force) for another.
set -euo pipefail

namespace=default
domain=cluster.local
days=365
force=0
outdir=""
usage() {
  sed -n 's/^# \{0,1\}//; 2,18p' "$0" >&2
  exit 2
}
while (($#)); do
  case "$1" in
    --namespace) [[ $# -ge 2 ]] || usage; namespace=$2; shift 2 ;;
    --namespace=*) namespace=${1#*=}; shift ;;
    --cluster-domain) [[ $# -ge 2 ]] || usage; domain=$2; shift 2 ;;
    --cluster-domain=*) domain=${1#*=}; shift ;;
    --days) [[ $# -ge 2 ]] || usage; days=$2; shift 2 ;;
    --days=*) days=${1#*=}; shift ;;
    --force) force=1; shift ;;
    -h|--help) usage ;;
    -*) echo "make-secrets.sh: unknown flag $1" >&2; usage ;;
    *) [[ -z "$outdir" ]] || usage; outdir=$1; shift ;;
  esac
done
if [[ ! "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "make-secrets.sh: --namespace \"$namespace\" is not a Kubernetes namespace name" >&2
  exit 2
fi
if [[ ! "$days" =~ ^[1-9][0-9]*$ ]]; then
  echo "make-secrets.sh: --days must be a positive integer, got \"$days\"" >&2
  exit 2
fi
if ! command -v openssl >/dev/null; then
  echo "make-secrets.sh: openssl not found (Debian package openssl)" >&2
  exit 1
fi
[[ -n "$outdir" ]] || outdir="$(cd "$(dirname "$0")" && pwd)/base/secrets"

files=(ca.crt ca.key coordinator.crt coordinator.key worker.crt worker.key token)
if ((!force)); then
  for f in "${files[@]}"; do
    if [[ -e "$outdir/$f" ]]; then
      echo "make-secrets.sh: $outdir/$f exists; pass --force to replace every file" >&2
      exit 1
    fi
  done
fi
mkdir -p "$outdir"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
quiet() {  # runs openssl, showing its output only when it fails
  if ! out=$("$@" 2>&1); then
    echo "make-secrets.sh: failed: $*" >&2
    echo "$out" >&2
    exit 1
  fi
}

quiet openssl req -x509 "${ec[@]}" -keyout "$work/ca.key" -out "$work/ca.crt" \
  -days "$days" -subj "/CN=lockstep-ca ($namespace)"

# issue NAME CN EXTENSIONS: a new EC key and a certificate signed by the CA.
serial=1
issue() {
  serial=$((serial + 1))
  printf '%b' "$3" >"$work/$1.ext"
  quiet openssl req "${ec[@]}" -keyout "$work/$1.key" -out "$work/$1.csr" -subj "/CN=$2"
  quiet openssl x509 -req -in "$work/$1.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
    -set_serial "$(date +%s)$serial" -days "$days" -extfile "$work/$1.ext" -out "$work/$1.crt"
}

svc=lockstep-coordinator
issue coordinator "$svc" \
  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:$svc,DNS:$svc.$namespace,DNS:$svc.$namespace.svc,DNS:$svc.$namespace.svc.$domain,DNS:localhost,IP:127.0.0.1\n"
# Workers dial each other at POD.lockstep-worker.NS.svc.D (--advertise); one
# wildcard certificate covers every pod of the StatefulSet, at any scale.
issue worker "lockstep-worker.$namespace" \
  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:*.lockstep-worker.$namespace.svc.$domain\n"

openssl rand -hex 32 >"$work/token"

for f in "${files[@]}"; do
  install -m 600 "$work/$f" "$outdir/$f"
done
echo "make-secrets.sh: wrote ${files[*]} to $outdir (namespace $namespace, valid $days days)"
