package blob_test

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/blob/blobtest"
)

func TestS3Contract(t *testing.T) {
	t.Parallel()
	m := blobtest.SharedMinIO(t)
	blobtest.Run(t, func(t *testing.T) blobtest.Target {
		s, err := blob.Open(m.URL(), blob.Options{})
		if err != nil {
			t.Fatalf("open S3 store: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return blobtest.Target{Store: s}
	})
}
