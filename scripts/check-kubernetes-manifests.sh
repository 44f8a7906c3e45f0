#!/usr/bin/env bash
# Checks docs/kubernetes/*.yaml against Kubernetes' schemas (strict: unknown fields are
# errors) with kubernetes-validate from PyPI, in a virtual environment of its own that is
# removed afterwards. The schemas ship in the package: validating needs no network, only
# the install does. Needs python3 and python3-venv (installed when missing, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.37.0       # kubernetes-validate's version
kubernetes=1.37.0    # the Kubernetes version whose schemas the manifests must satisfy

if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  [[ $(id -u) == 0 ]] || { echo "check-kubernetes-manifests: install python3-venv" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
venv=$(mktemp -d /tmp/appbox-kubernetes-validate.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
"$venv/bin/kubernetes-validate" --strict --kubernetes-version "$kubernetes" docs/kubernetes/*.yaml
