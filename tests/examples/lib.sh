# Sourced by the example tests: a scratch folder ($work, removed on exit), the check helper and its
# summary, and the skip for absent models.
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
pass=0; fail=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
}
skip_without() {  # skip_without FILE WHAT: exit 77 (ctest's SKIP_RETURN_CODE) when FILE is missing
  if [ ! -f "$1" ]; then
    echo "SKIPPED: $2 not found at $1 (scripts/fetch_example_models.sh needs npm and the registry)"
    exit 77
  fi
}
summary() {  # summary TITLE: prints the counts; the exit status says whether all passed
  echo "$1: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
