package agent

import (
	"testing"
)

// TestWorkerExpressionsMatrixObjects: an expression the worker evaluates reads a matrix
// value that is a mapping as the object it was written as (the plan holds it as
// build=1, build__cc=gcc), keys and all, and writes the whole of it as JSON.
func TestWorkerExpressionsMatrixObjects(t *testing.T) {
	t.Parallel()
	b, r := actionsBundle(t, t.TempDir())
	_, run := b.submitActions(t, r, `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        build: [{name: gnu, cc: gcc}]
    env:
      KIND: ${{ matrix.build.cc == 'gcc' && 'gnu-cc' || 'other' }}
    steps:
      - run: |
          test "$KIND" = gnu-cc
          test "${{ matrix.build.name }}" = gnu
          test "$(echo '${{ toJSON(matrix.build) }}' | tr -d ' \n')" = '{"cc":"gcc","name":"gnu"}'
`)
	b.wantSuccess(t, uuidOf(t, run))
}
