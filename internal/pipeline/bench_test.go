package pipeline

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// BenchmarkCompile measures planning cost for typical and for limit-sized definitions.
func BenchmarkCompile(b *testing.B) {
	release, err := os.ReadFile("../../examples/release.yml")
	if err != nil {
		b.Fatal(err)
	}
	// 10,000 jobs: a 100 x 100 matrix plus fan-in, the largest run the default limits allow.
	large := "jobs:\n  t:\n    matrix: {a: [" + seq(100) + "], b: [" + seq(99) + "]}\n" +
		"    steps: [{run: \"go test -run ${{ matrix.a }} -shard ${{ matrix.b }}\"}]\n" +
		"  after:\n    needs: [t]\n    steps: [{run: x}]\n"
	// 500 distinct jobs in a chain of 10 waves.
	var wide strings.Builder
	wide.WriteString("jobs:\n")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&wide, "  j%d:\n", i)
		if i >= 50 {
			fmt.Fprintf(&wide, "    needs: [j%d]\n", i-50)
		}
		wide.WriteString("    steps: [{run: make}]\n")
	}
	// A GitHub Actions workflow with a 256-instance matrix (4 x 4 x 4 x 4), read by the
	// workflow front end and planned by the same compiler.
	workflow := "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    strategy:\n      matrix: {os: [a, b, c, d], go: [w, x, y, z], shard: [1, 2, 3, 4], db: [p, q, r, s]}\n" +
		"    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/setup-go@v5\n        with: {go-version: '${{ matrix.go }}'}\n" +
		"      - run: go test -shard ${{ matrix.shard }} -db ${{ matrix.db }} ./... # ${{ github.sha }}\n" +
		"  after:\n    needs: test\n    if: always() && needs.test.result == 'failure'\n    runs-on: ubuntu-latest\n    steps: [{run: echo failed}]\n"
	for _, bc := range []struct {
		name string
		src  []byte
	}{
		{"release", release},
		{"matrix-4951-jobs", []byte(large)},
		{"500-jobs-10-waves", []byte(wide.String())},
		{"workflow-matrix-256", []byte(workflow)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.src)))
			for b.Loop() {
				if _, err := Compile(bc.src, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
