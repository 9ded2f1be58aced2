package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKilledServerPartialUpload: a coordinator killed in the middle of an artifact upload
// to its blob directory leaves a partial file behind; the coordinator started again on
// the same data removes it before it serves, rather than a day later.
func TestKilledServerPartialUpload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "gantry.db")
	tmp := filepath.Join(dir, "blobs", "tmp")
	srv := startServerProcess(t, db)

	// A job leased to a worker, which registers an artifact and gets its upload URL.
	submitRun(t, srv.base, "name: up\njobs:\n  a: {steps: [{run: 'true'}]}\n")
	var claim struct {
		Jobs []struct {
			ID    string `json:"id"`
			Lease struct {
				Token string `json:"token"`
			} `json:"lease"`
		} `json:"jobs"`
	}
	if code, err := postJSON(t.Context(), http.DefaultClient, srv.base, "/api/v1/agent/claim",
		map[string]any{"worker_id": "w", "max": 1, "wait": "5s"}, &claim); err != nil || code != http.StatusOK || len(claim.Jobs) != 1 {
		t.Fatalf("claim: %d %v %+v", code, err, claim)
	}
	content := strings.Repeat("artifact bytes ", 1000)
	sum := sha256.Sum256([]byte(content))
	var reg struct {
		Artifacts []struct {
			Upload *struct {
				URL string `json:"url"`
			} `json:"upload"`
		} `json:"artifacts"`
	}
	job := claim.Jobs[0]
	if code, err := postJSON(t.Context(), http.DefaultClient, srv.base, "/api/v1/agent/jobs/"+job.ID+"/artifacts",
		map[string]any{"token": job.Lease.Token, "artifacts": []map[string]any{{"name": "out.bin", "sha256": hex.EncodeToString(sum[:]), "size": len(content)}}},
		&reg); err != nil || code != http.StatusOK || len(reg.Artifacts) != 1 || reg.Artifacts[0].Upload == nil {
		t.Fatalf("register artifact: %d %v %+v", code, err, reg)
	}

	// Half the body, then the coordinator dies.
	u, err := url.Parse(srv.base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", reg.Artifacts[0].Upload.URL, u.Host, len(content), content[:len(content)/2])
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir(tmp)
		if len(entries) == 1 {
			if fi, err := entries[0].Info(); err == nil && fi.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upload's temp file did not appear in %s: %v", tmp, entries)
		}
		time.Sleep(5 * time.Millisecond) // polling the directory
	}
	srv.kill(t)
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Fatalf("after the kill, %s holds %v; want the partial upload", tmp, entries)
	}

	startServerProcess(t, db)
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("the restarted coordinator left the partial upload in %s: %v", tmp, entries)
	}
}
