package blob_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gantry-ci/gantry/internal/blob/blobtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := blobtest.StopSharedMinIO(); err != nil {
		fmt.Fprintln(os.Stderr, "stop MinIO:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}
