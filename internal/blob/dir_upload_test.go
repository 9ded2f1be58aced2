package blob_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
)

// TestDirRemovesPartialUploadsOnOpen: a partial upload that a killed process left in
// tmp/ is removed as soon as the store opens again, not a day later; an upload still
// under way in another process sharing the directory is left alone and completes.
func TestDirRemovesPartialUploadsOnOpen(t *testing.T) {
	t.Parallel()
	b := setupDir(t, false)
	tmp := filepath.Join(b.dir, "tmp")

	// What a coordinator killed in the middle of an upload leaves: a temp file nobody
	// holds open.
	left := filepath.Join(tmp, "upload-killed")
	if err := os.WriteFile(left, []byte(strings.Repeat("x", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}

	// An upload under way: half of its body sent, the rest held back.
	data := strings.Repeat("live upload ", 100)
	d := digestOf(data)
	put, err := b.store.PresignPut(t.Context(), d, int64(len(data)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, b.srv.URL+put.URL, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(data))
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := b.srv.Client().Do(req)
		if err != nil {
			t.Errorf("upload: %v", err)
			close(answered)
			return
		}
		answered <- resp
	}()
	if _, err := io.WriteString(pw, data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The upload's temp file exists and is locked: between the two, a sweep may take
		// the file and the upload makes another.
		entries, _ := os.ReadDir(tmp)
		if len(entries) == 2 && lockedByOther(t, tmp, entries, "upload-killed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upload's temp file did not appear locked: %v", entries)
		}
		time.Sleep(5 * time.Millisecond) // polling the directory, not waiting on time
	}

	// The store opens again on the same directory, as a restarted coordinator does.
	again, err := blob.OpenDir(b.dir, blob.Options{Secret: secret(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the partial upload of a killed process is still there after the store opened: %v", err)
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 {
		t.Fatalf("temp files after the store opened: %v, want the live upload's only", entries)
	}

	if _, err := io.WriteString(pw, data[len(data)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	resp := <-answered
	if resp == nil {
		t.FailNow()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the live upload answered %d, want 201", resp.StatusCode)
	}
	if info, err := again.Stat(t.Context(), d); err != nil || info.Size != int64(len(data)) {
		t.Fatalf("the live upload's blob: %+v, %v", info, err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("temp files left after the upload: %v", entries)
	}
}

// lockedByOther reports whether the entry of dir other than skip is held locked by
// someone else (the flock a live upload keeps).
func lockedByOther(t *testing.T, dir string, entries []os.DirEntry, skip string) bool {
	t.Helper()
	for _, e := range entries {
		if e.Name() == skip {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return false
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return false
		}
		return true
	}
	return false
}
