package kubernetes

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"

	"github.com/gantry-ci/gantry/internal/executor"
)

// WorkspaceServer hands a job's workspace (checkout, artifacts of its needs) to the init
// container of its pod: the worker serves each workspace as a tar stream at a URL
// carrying a random token, valid from Begin until the job's session ends. It is an
// http.Handler for the worker to listen with on an address its pods reach.
type WorkspaceServer struct {
	base string
	mu   sync.Mutex
	dirs map[string]string // token -> workspace directory
}

// NewWorkspaceServer serves workspaces under base, the URL the pods reach the handler
// at (http://10.0.0.5:8081).
func NewWorkspaceServer(base string) *WorkspaceServer {
	return &WorkspaceServer{base: strings.TrimSuffix(base, "/"), dirs: map[string]string{}}
}

// Offer makes dir fetchable until release is called, and returns its URL.
func (w *WorkspaceServer) Offer(dir string) (url string, release func()) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	w.mu.Lock()
	w.dirs[token] = dir
	w.mu.Unlock()
	return w.base + "/workspace/" + token, func() {
		w.mu.Lock()
		delete(w.dirs, token)
		w.mu.Unlock()
	}
}

// ServeHTTP answers GET /workspace/TOKEN with the workspace as a tar stream.
func (w *WorkspaceServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, "/workspace/")
	if !ok || r.Method != http.MethodGet {
		http.NotFound(rw, r)
		return
	}
	w.mu.Lock()
	dir, ok := w.dirs[token]
	w.mu.Unlock()
	if !ok {
		http.Error(rw, "no such workspace (the job ended, or the URL is wrong)", http.StatusNotFound)
		return
	}
	rw.Header().Set("Content-Type", "application/x-tar")
	// A failure half way cannot change the status any more; the init container sees a
	// truncated tar and fails.
	_ = executor.TarDir(rw, dir, false)
}
