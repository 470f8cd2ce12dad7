#!/usr/bin/env bash
# Creates (once) the Python venv used by the pypaimon interoperability tests and
# prints the venv's python path as the last line of stdout.
#
#   scripts/pyenv.sh [--with-scale-readers] [--with-s3-server]
#   scripts/pyenv.sh --schemathesis
#   scripts/pyenv.sh --client
#
#   --with-scale-readers  also install Ray and Daft into the same venv, for pypaimon's
#                         pypaimon.ray / pypaimon.daft readers (tests/scale_readers.rs). About
#                         135 MB of wheels, ~15 s on two cores. Exits 3 with a message on stderr
#                         when pip finds no wheel of them for this Python (nothing else installed).
#   --with-s3-server      also install moto's S3 server (moto_server), the local S3-compatible
#                         store of the object-storage warehouse test (tests/s3_warehouse.rs).
#   --schemathesis        instead: create (once) a venv of its own, $LIVESTATE_VENV-schemathesis,
#                         with schemathesis (the OpenAPI conformance fuzzer of tests/api_schema.rs;
#                         its pins differ from pypaimon's) and print that venv's python.
#   --client              instead: create (once) a venv of its own, $LIVESTATE_VENV-client, with
#                         the Python client's pinned dependencies (httpx, pydantic) and pytest,
#                         and the client (clients/python) installed editable from this clone;
#                         print that venv's python (tests/python_client.rs runs its tests).
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

# Ray and Daft for pypaimon 2.1.0's distributed readers (its extras ask for ray>=2.10,<3 and
# daft>=0.7.6), with the dependencies they added to the venv above when this was written.
SCALE_REQUIREMENTS="ray==2.60.0
daft==0.7.26
msgpack==1.2.4
protobuf==7.36.2
tqdm==4.67.3
filelock==4.3.1"

# moto's S3 server (it brings boto3, used by the test to create its bucket).
S3_REQUIREMENTS="moto[server]==5.2.5"

# schemathesis and what it resolved to when this was written (Python 3.11).
SCHEMATHESIS_REQUIREMENTS="schemathesis==4.32.5
anyio==4.16.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
click==8.5.1
graphql-core==3.3.2
harfile==0.6.0
hypothesis==6.170.17
hypothesis-graphql==0.13.5
idna==3.20
iniconfig==2.3.1
jsonschema_rs==0.60.3
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
packaging==26.4
pluggy==1.7.0
Pygments==2.21.0
pyrate-limiter==4.5.1
pytest==9.2.0
PyYAML==6.0.4
requests==2.34.2
rich==15.0.0
sortedcontainers==2.4.0
typing_extensions==4.16.0
urllib3==2.8.0
Werkzeug==3.1.9"

# The Python client's dependencies and pytest, and what they resolved to when this was written
# (Python 3.11); setuptools builds the editable install without fetching anything.
CLIENT_REQUIREMENTS="httpx==0.29.0
pydantic==2.14.4
pytest==9.2.0
annotated-types==0.8.0
anyio==4.16.0
certifi==2026.10.19.post1
h11==0.16.0
httpcore==1.0.9
idna==3.21
iniconfig==2.3.1
packaging==26.4
pluggy==1.7.0
pydantic_core==2.50.5
Pygments==2.21.0
typing-inspection==0.4.5
typing_extensions==4.16.0
setuptools==84.2.1"

WITH_SCALE=0
WITH_S3=0
for arg in "$@"; do
    case "$arg" in
        --with-scale-readers) WITH_SCALE=1 ;;
        --with-s3-server) WITH_S3=1 ;;
        --schemathesis)
            ST_VENV="$VENV-schemathesis"
            ST_PY="$ST_VENV/bin/python"
            ST_MARKER="$ST_VENV/.livestate-pyenv"
            if ! [[ -x "$ST_PY" && -f "$ST_MARKER" && "$(cat "$ST_MARKER")" == "$SCHEMATHESIS_REQUIREMENTS" ]]; then
                mkdir -p "$(dirname "$ST_VENV")"
                exec 9>"$ST_VENV.lock"
                if command -v flock >/dev/null 2>&1; then
                    flock 9
                fi
                if ! [[ -f "$ST_MARKER" && "$(cat "$ST_MARKER")" == "$SCHEMATHESIS_REQUIREMENTS" ]]; then
                    [[ -x "$ST_PY" ]] || "$PYTHON" -m venv "$ST_VENV" >&2
                    echo "pyenv.sh: installing schemathesis into $ST_VENV" >&2
                    st_file="$(mktemp)"
                    trap 'rm -f "$st_file"' EXIT
                    printf '%s\n' "$SCHEMATHESIS_REQUIREMENTS" >"$st_file"
                    PIP_DISABLE_PIP_VERSION_CHECK=1 "$ST_PY" -m pip install --quiet -r "$st_file" >&2
                    "$ST_VENV/bin/schemathesis" --version >&2
                    printf '%s' "$SCHEMATHESIS_REQUIREMENTS" >"$ST_MARKER"
                fi
                exec 9>&-
            fi
            echo "$ST_PY"
            exit 0
            ;;
        --client)
            CL_VENV="$VENV-client"
            CL_PY="$CL_VENV/bin/python"
            CL_MARKER="$CL_VENV/.livestate-pyenv"
            CL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
            # The marker holds the pins and the clone the client was installed from: another
            # clone reinstalls it (editable: it imports that clone's source).
            CL_WANT="$CLIENT_REQUIREMENTS
client: $CL_ROOT/clients/python"
            if ! [[ -x "$CL_PY" && -f "$CL_MARKER" && "$(cat "$CL_MARKER")" == "$CL_WANT" ]]; then
                mkdir -p "$(dirname "$CL_VENV")"
                exec 9>"$CL_VENV.lock"
                if command -v flock >/dev/null 2>&1; then
                    flock 9
                fi
                if ! [[ -f "$CL_MARKER" && "$(cat "$CL_MARKER")" == "$CL_WANT" ]]; then
                    [[ -x "$CL_PY" ]] || "$PYTHON" -m venv "$CL_VENV" >&2
                    echo "pyenv.sh: installing the Python client and its pinned dependencies into $CL_VENV" >&2
                    cl_file="$(mktemp)"
                    trap 'rm -f "$cl_file"' EXIT
                    printf '%s\n' "$CLIENT_REQUIREMENTS" >"$cl_file"
                    PIP_DISABLE_PIP_VERSION_CHECK=1 "$CL_PY" -m pip install --quiet -r "$cl_file" >&2
                    PIP_DISABLE_PIP_VERSION_CHECK=1 "$CL_PY" -m pip install --quiet --no-deps --no-build-isolation \
                        -e "$CL_ROOT/clients/python" >&2
                    "$CL_PY" -c 'import livestate_client, httpx, pydantic, pytest' >&2
                    printf '%s' "$CL_WANT" >"$CL_MARKER"
                fi
                exec 9>&-
            fi
            echo "$CL_PY"
            exit 0
            ;;
        *) echo "pyenv.sh: unknown argument $arg (--with-scale-readers, --with-s3-server, --schemathesis, --client)" >&2; exit 2 ;;
    esac
done

MARKER="$VENV/.livestate-pyenv"
SCALE_MARKER="$VENV/.livestate-pyenv-scale"
S3_MARKER="$VENV/.livestate-pyenv-s3"
VENV_PY="$VENV/bin/python"

installed() {
    [[ -x "$VENV_PY" && -f "$MARKER" ]] && [[ "$(cat "$MARKER")" == "$REQUIREMENTS" ]]
}

scale_installed() {
    installed && [[ -f "$SCALE_MARKER" ]] && [[ "$(cat "$SCALE_MARKER")" == "$SCALE_REQUIREMENTS" ]]
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

if [[ "$WITH_SCALE" == 1 ]] && ! scale_installed; then
    exec 9>"$VENV.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    if ! scale_installed; then
        echo "pyenv.sh: installing ray and daft into $VENV" >&2
        scale_file="$(mktemp)"
        pip_log="$(mktemp)"
        trap 'rm -f "${req_file:-}" "$scale_file" "$pip_log"' EXIT
        printf '%s\n' "$SCALE_REQUIREMENTS" >"$scale_file"
        start=$(date +%s)
        if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV_PY" -m pip install --quiet -r "$scale_file" >&2 2>"$pip_log"; then
            cat "$pip_log" >&2
            if grep -q -e "No matching distribution" -e "Could not find a version" "$pip_log"; then
                echo "pyenv.sh: pip found no ray/daft for $("$VENV_PY" -V 2>&1) here ($(grep -m1 '^ERROR' "$pip_log" | cut -c1-200)); the Ray and Daft reader test skips" >&2
                exit 3
            fi
            exit 1
        fi
        "$VENV_PY" -c 'import ray, daft, pypaimon.ray, pypaimon.daft' >&2
        echo "pyenv.sh: ray and daft installed in $(( $(date +%s) - start ))s" >&2
        printf '%s' "$SCALE_REQUIREMENTS" >"$SCALE_MARKER"
    fi
    exec 9>&-
fi

s3_installed() {
    installed && [[ -f "$S3_MARKER" ]] && [[ "$(cat "$S3_MARKER")" == "$S3_REQUIREMENTS" ]]
}

if [[ "$WITH_S3" == 1 ]] && ! s3_installed; then
    exec 9>"$VENV.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    if ! s3_installed; then
        echo "pyenv.sh: installing $S3_REQUIREMENTS into $VENV" >&2
        PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV_PY" -m pip install --quiet "$S3_REQUIREMENTS" >&2
        "$VENV_PY" -c 'import moto, boto3' >&2
        [[ -x "$VENV/bin/moto_server" ]] || { echo "pyenv.sh: moto_server missing from $VENV/bin" >&2; exit 1; }
        printf '%s' "$S3_REQUIREMENTS" >"$S3_MARKER"
    fi
    exec 9>&-
fi

echo "$VENV_PY"
