#!/usr/bin/env bash
# Ensures a venv under .cache/NAME with MODULE's package pinned to VERSION
# (installed from the package index when missing or at another version)
# and prints its python. Fails, never skips, when it cannot:
#   python=$(bash scripts/python-venv.sh NAME PACKAGE MODULE VERSION)
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 package=$2 module=$3 version=$4
venv=.cache/$name
if ! "$venv/bin/python" -c "import $module, sys; sys.exit($module.__version__ != '$version')" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || { echo "python-venv: FAILED: cannot create a venv (apt-get install python3-venv)" >&2; exit 1; }
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$package==$version" >&2 \
        || { echo "python-venv: FAILED: cannot install $package==$version from the package index" >&2; exit 1; }
fi
echo "$PWD/$venv/bin/python"
