package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/image"

	"github.com/gantry-ci/gantry/internal/executor"
)

// The warm pool takes a container's create and start, most of what a container job costs
// on a slow engine, off the job's path: for the last few kinds of job it ran, the
// executor keeps containers created and started ahead of need, each with a workspace
// directory of its own bound at executor.WorkspacePath. A job that matches takes one:
// its workspace's entries move into that directory, which is then renamed over the
// job's (now empty) workspace, so the job's workspace on the worker is the one the
// container sees, at the same path as before. A pooled container serves one job only
// and goes with it, as a cold one does; taking one starts a replacement.

// LabelPoolDir is the label of a pooled container that names its workspace directory on
// the worker, which a sweep removes with the container.
const LabelPoolDir = "gantry.pool-dir"

// poolDirPrefix starts the name of a pooled container's workspace directory; a sweep
// removes only directories so named.
const poolDirPrefix = "gantry-pool-"

// poolKinds is how many kinds of job (image, user, limits) the pool keeps containers for;
// the one used longest ago makes way for a new one.
const poolKinds = 4

// makeTimeout bounds the making of one warm container.
const makeTimeout = 2 * time.Minute

// poolKey is what a pooled container was made with: a job takes one only when its own
// is the same.
type poolKey struct {
	workerID, image, user string
	milliCPU, memory      int64
	// parent is the directory the job's workspace lies in: the pooled workspace is made
	// there, so that it can be renamed over the job's.
	parent string
}

// warm is one pooled container, made or being made.
type warm struct {
	done chan struct{} // closed once sess or err is set
	sess *session      // nil until made, and when the making failed
	err  error
	dir  string // the workspace directory bound in the container
	// taken is set when a job has it, or waits for it; unwanted when it is to be
	// removed once made.
	taken, unwanted bool
}

// poolKind is the pool of one key.
type poolKind struct {
	key   poolKey
	warms []*warm // made or being made, not taken; oldest first
}

// pool keeps warm containers for the executor.
type pool struct {
	d    *Docker
	size int // containers per kind

	ctx   context.Context // what the pool's containers are made under
	fills sync.WaitGroup

	mu     sync.Mutex
	kinds  []*poolKind // used longest ago first
	closed bool

	// Counters for tests.
	taken, made, discarded int64
}

func newPool(d *Docker, size int) *pool {
	return &pool{d: d, size: size, ctx: context.Background()}
}

// keyOf is the pool key of job j, and whether a pooled container can run it at all.
func (p *pool) keyOf(j executor.Job, ownNetwork bool) (poolKey, bool) {
	if p == nil || p.size <= 0 || ownNetwork || len(j.Services) > 0 || j.Privileged {
		return poolKey{}, false
	}
	return poolKey{workerID: j.WorkerID, image: j.Image, user: j.User, milliCPU: j.MilliCPU, memory: j.Memory,
		parent: filepath.Dir(j.Workspace)}, true
}

// take returns a pooled container for job j, made of img (the image j's name stands for,
// as j's executor just inspected it), or nil when none is there or being made (or its
// image is no longer img). Either way, the pool of j's kind is topped up in the
// background, with containers of img.
func (p *pool) take(ctx context.Context, key poolKey, img image.InspectResponse) *warm {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	k := p.kind(key)
	var w *warm
	// A container already made first, else the one that will be made soonest.
	for _, c := range k.warms {
		if c.sess != nil {
			w = c
			break
		}
	}
	if w == nil {
		for _, c := range k.warms {
			if c.err == nil {
				w = c
				break
			}
		}
	}
	if w != nil {
		w.taken = true
		k.warms = removeWarm(k.warms, w)
	}
	p.topUp(k, img)
	p.mu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		// Not needed after all: it goes once it is made.
		p.mu.Lock()
		select {
		case <-w.done:
			p.mu.Unlock()
			p.discard(w)
		default:
			w.unwanted = true
			p.mu.Unlock()
		}
		return nil
	}
	if w.sess == nil {
		return nil
	}
	if w.sess.imageID != img.ID {
		// The image's name stands for another image now.
		p.discard(w)
		return nil
	}
	p.mu.Lock()
	p.taken++
	p.mu.Unlock()
	return w
}

// kind returns key's pool, made the most recently used; a kind beyond poolKinds goes.
// p.mu is held.
func (p *pool) kind(key poolKey) *poolKind {
	for i, k := range p.kinds {
		if k.key == key {
			p.kinds = append(append(p.kinds[:i:i], p.kinds[i+1:]...), k)
			return k
		}
	}
	k := &poolKind{key: key}
	p.kinds = append(p.kinds, k)
	if len(p.kinds) > poolKinds {
		old := p.kinds[0]
		p.kinds = p.kinds[1:]
		for _, w := range old.warms {
			p.discardWhenMade(w)
		}
	}
	return k
}

// topUp starts making containers of img for k until it has p.size made or being made.
// p.mu is held.
func (p *pool) topUp(k *poolKind, img image.InspectResponse) {
	for len(k.warms) < p.size {
		w := &warm{done: make(chan struct{})}
		k.warms = append(k.warms, w)
		p.fills.Add(1)
		go p.fill(k, w, img)
	}
}

// fill makes w of img: its workspace directory and its container.
func (p *pool) fill(k *poolKind, w *warm, img image.InspectResponse) {
	defer p.fills.Done()
	sess, dir, err := p.make(k.key, img)
	p.mu.Lock()
	w.sess, w.dir, w.err = sess, dir, err
	if err == nil {
		p.made++
	} else {
		k.warms = removeWarm(k.warms, w)
	}
	close(w.done)
	gone := w.unwanted || p.closed && !w.taken
	p.mu.Unlock()
	if err != nil {
		p.d.log.Warn("docker: make a warm container; jobs of its image start cold", "image", k.key.image, "err", err)
		return
	}
	if gone {
		p.discard(w)
	}
}

// make creates and starts a container of key's kind, of img (key.image as inspected
// last), with a workspace directory of its own in key.parent.
func (p *pool) make(key poolKey, img image.InspectResponse) (*session, string, error) {
	dir, err := os.MkdirTemp(key.parent, poolDirPrefix)
	if err != nil {
		return nil, "", fmt.Errorf("make a warm container's workspace: %w", err)
	}
	j := executor.Job{ID: "pool-" + randomHex(6), WorkerID: key.workerID, Workspace: dir, Image: key.image,
		Pull: PullNever, User: key.user, MilliCPU: key.milliCPU, Memory: key.memory}
	s := &session{d: p.d, job: j, role: "pool", poolDir: dir}
	ctx, cancel := context.WithTimeout(p.ctx, makeTimeout)
	defer cancel()
	if err := s.begin(ctx, false, &img); err != nil {
		s.ended = true
		if rerr := s.remove(context.WithoutCancel(p.ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	return s, dir, nil
}

// discardWhenMade removes w once it is made. p.mu is held.
func (p *pool) discardWhenMade(w *warm) {
	select {
	case <-w.done:
		p.fills.Add(1)
		go func() {
			defer p.fills.Done()
			p.discard(w)
		}()
	default:
		w.unwanted = true
	}
}

// discard removes a pooled container that serves no job, and its workspace directory.
func (p *pool) discard(w *warm) { p.discardWith(w, os.RemoveAll) }

// discardWith removes a pooled container that serves no job, and its workspace
// directory with removeDir.
func (p *pool) discardWith(w *warm, removeDir func(string) error) {
	if w.sess == nil {
		return
	}
	p.mu.Lock()
	p.discarded++
	p.mu.Unlock()
	if err := w.sess.remove(context.Background()); err != nil {
		p.d.log.Warn("docker: remove a warm container; the sweep will", "container", w.sess.container, "err", err)
	}
	_ = removeDir(w.dir)
}

// close removes every pooled container not taken, and waits for those being made.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	var idle []*warm
	for _, k := range p.kinds {
		for _, w := range k.warms {
			if w.sess != nil {
				idle = append(idle, w)
			}
		}
		k.warms = nil
	}
	p.mu.Unlock()
	// Those being made are not cancelled: a create the engine completes after its
	// caller gave up leaves a container nobody knows of until the next sweep. They go
	// once made.
	var wg sync.WaitGroup
	for _, w := range idle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.discard(w)
		}()
	}
	wg.Wait()
	p.fills.Wait()
}

func removeWarm(ws []*warm, w *warm) []*warm {
	for i, c := range ws {
		if c == w {
			return append(ws[:i:i], ws[i+1:]...)
		}
	}
	return ws
}

// adopt makes w's workspace directory job j's workspace: j.Workspace's entries move into
// it, it gets j.Workspace's mode and owner, and it is renamed over j.Workspace, which is
// then empty. The path stays the same for the worker, and the container sees it. On an
// error, the entries moved are moved back.
func adopt(w *warm, ws string) error {
	st, err := os.Lstat(ws)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("workspace %s is not a directory", ws)
	}
	entries, err := os.ReadDir(ws)
	if err != nil {
		return err
	}
	var moved []string
	undo := func(err error) error {
		for _, name := range moved {
			_ = os.Rename(filepath.Join(w.dir, name), filepath.Join(ws, name))
		}
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(ws, e.Name()), filepath.Join(w.dir, e.Name())); err != nil {
			return undo(err)
		}
		moved = append(moved, e.Name())
	}
	if err := os.Chmod(w.dir, st.Mode().Perm()|st.Mode()&(os.ModeSetgid|os.ModeSticky)); err != nil {
		return undo(err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != os.Geteuid() || int(sys.Gid) != os.Getegid()) {
		if err := os.Lchown(w.dir, int(sys.Uid), int(sys.Gid)); err != nil {
			return undo(err)
		}
	}
	// os.Rename refuses to replace a directory; rename(2) replaces an empty one.
	if err := syscall.Rename(w.dir, ws); err != nil {
		return undo(&os.LinkError{Op: "rename", Old: w.dir, New: ws, Err: err})
	}
	return nil
}

// isPoolDir says whether dir may be removed as a pooled container's workspace.
func isPoolDir(dir string) bool {
	return filepath.IsAbs(dir) && strings.HasPrefix(filepath.Base(dir), poolDirPrefix)
}
