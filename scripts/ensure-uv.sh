#!/usr/bin/env bash
# Puts uv on PATH: installs it with pip (user site) when it is missing. Sourced by the other scripts.
if ! command -v uv >/dev/null 2>&1; then
  echo "uv not found: installing it with pip" >&2
  python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv
  PATH="$(python3 -m site --user-base)/bin:$PATH"
  export PATH
  hash -r
fi
