#!/usr/bin/env bash
# Puts uv within reach: installs it with pip (user site, else the interpreter's site) when it
# is missing, and falls back to `python3 -m uv` when pip put it off PATH. Sourced by the other
# scripts.
if ! command -v uv >/dev/null 2>&1; then
  echo "uv not found: installing it with pip" >&2
  python3 -m pip install --quiet --user uv 2>/dev/null || python3 -m pip install --quiet uv
  PATH="$(python3 -m site --user-base)/bin:$PATH"
  export PATH
  hash -r
  if ! command -v uv >/dev/null 2>&1; then
    uv() { python3 -m uv "$@"; }
  fi
fi
