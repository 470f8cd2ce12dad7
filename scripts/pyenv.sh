#!/usr/bin/env bash
# Creates (once) the Python venv used by the pypaimon interoperability tests and
# prints the venv's python path as the last line of stdout.
#
#   LIVESTATE_VENV   venv directory (default: $HOME/.cache/livestate/venv)
#   PYTHON           interpreter used to create the venv (default: python3)
#
# Re-running with everything installed only checks a marker file and returns.
# All pip / venv chatter goes to stderr so stdout stays machine-readable.
set -euo pipefail

VENV="${LIVESTATE_VENV:-$HOME/.cache/livestate/venv}"
PYTHON="${PYTHON:-python3}"

# pypaimon 2.1.0 (the reference reader) and the MCP Python SDK (the reference MCP client), and the
# dependency versions it resolved to when this script was
# written (Python 3.11). Changing this list changes the marker, forcing a reinstall.
REQUIREMENTS="pypaimon==2.1.0
pyarrow==19.0.1
pandas==2.3.3
polars==1.44.2
numpy==2.4.6
fastavro==1.13.1
fsspec==2025.12.0
cachetools==5.5.2
cramjam==2.14.0
isal==1.9.1
zstandard==0.25.0
backports.zstd==1.3.0
pyroaring==1.2.0
readerwriterlock==1.0.10
PyYAML==6.0.4
requests==2.34.2
urllib3==2.8.0
mcp==2.3.0"

MARKER="$VENV/.livestate-pyenv"
VENV_PY="$VENV/bin/python"

installed() {
    [[ -x "$VENV_PY" && -f "$MARKER" ]] && [[ "$(cat "$MARKER")" == "$REQUIREMENTS" ]]
}

if ! installed; then
    mkdir -p "$(dirname "$VENV")"
    # Serialise concurrent first runs (e.g. parallel tests) on the same venv.
    exec 9>"$VENV.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    if ! installed; then
        if [[ ! -x "$VENV_PY" ]]; then
            echo "pyenv.sh: creating venv at $VENV" >&2
            "$PYTHON" -m venv "$VENV" >&2
        fi
        echo "pyenv.sh: installing pypaimon==2.1.0 into $VENV" >&2
        req_file="$(mktemp)"
        trap 'rm -f "$req_file"' EXIT
        printf '%s\n' "$REQUIREMENTS" >"$req_file"
        PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV_PY" -m pip install --quiet -r "$req_file" >&2
        # Fail here, not in the test, if the install is unusable.
        "$VENV_PY" -c 'import pypaimon, pyarrow, mcp; from pypaimon import CatalogFactory' >&2
        printf '%s' "$REQUIREMENTS" >"$MARKER"
    fi
    exec 9>&-
fi

echo "$VENV_PY"
