package logs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// FileStorage keeps each job attempt's log as an append-only NDJSON file in a directory
// (<dir>/<job id>/<attempt>.log) with an in-memory seq index, rebuilt from the file when
// it is first opened. Appends are written before they are acknowledged, so a coordinator
// crash loses nothing; files are fsynced every SyncEvery and when the attempt ends, so
// losing the machine itself can cost at most that long of acknowledged lines.
type FileStorage struct {
	dir string
	// noSync: the files are never fsynced (NeverSync).
	noSync bool
	log    *slog.Logger
	// mu guards the maps only; it is never held across file I/O, which can stall for
	// long on a busy disk and would stall every log with it.
	mu   sync.Mutex
	open map[Key]*logFile
	// openers serialise, per log, opening its file with purging it: a file must be
	// opened (and rebuilt) once, never while another handle appends to it or while it
	// is being removed.
	openers map[Key]*opener

	stop chan struct{}
	done chan struct{}
}

// indexEvery is how many lines apart the seq index marks file offsets.
const indexEvery = 256

// idleClose is how long an attempt's file stays open with no appends before the sync
// loop closes it (a job whose worker vanished never calls Finish).
const idleClose = 5 * time.Minute

// opener is a log's open lock, with the number of goroutines holding or waiting for it.
type opener struct {
	mu sync.Mutex
	n  int
}

type logFile struct {
	// syncMu is held across an fsync, which can take long, so that appends (under mu)
	// go on meanwhile; close takes it first, so the descriptor stays open until the
	// fsync returns.
	syncMu  sync.Mutex
	mu      sync.Mutex
	f       *os.File
	size    int64
	next    int64
	marks   []mark // marks[i] is where seq marks[i].seq starts
	dirty   bool
	used    time.Time
	closed  bool // by Finish, Purge or the idle sweep; a writer opens the file again
	removed bool
}

type mark struct {
	seq int64
	off int64
}

var _ Storage = (*FileStorage)(nil)

// NeverSync, as OpenFileStorage's syncEvery, never fsyncs the files: for a directory
// deleted when its process ends (gantry run), which no crash of the machine could leave.
const NeverSync time.Duration = -1

// OpenFileStorage keeps logs under dir, creating it, and syncs written files every
// syncEvery (1 s when zero; never with NeverSync).
func OpenFileStorage(dir string, syncEvery time.Duration, log *slog.Logger) (*FileStorage, error) {
	// Logs may hold whatever a step printed: readable by the coordinator's user only.
	if err := mkdirPrivate(dir); err != nil {
		return nil, fmt.Errorf("open log storage: %w", err)
	}
	noSync := syncEvery == NeverSync
	if syncEvery <= 0 {
		syncEvery = time.Second // still the pace of closing idle files
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &FileStorage{dir: dir, noSync: noSync, log: log, open: map[Key]*logFile{}, openers: map[Key]*opener{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.syncLoop(syncEvery)
	return s, nil
}

func (s *FileStorage) path(k Key) string {
	return filepath.Join(s.dir, k.Job.String(), strconv.Itoa(k.Attempt)+".log")
}

// file returns the open state of k's log, opening (and, with create, creating) it.
// It returns nil, nil when the log does not exist and create is false.
func (s *FileStorage) file(k Key, create bool) (*logFile, error) {
	s.mu.Lock()
	lf, ok := s.open[k]
	s.mu.Unlock()
	if ok {
		return lf, nil
	}
	unlock := s.lockOpen(k)
	defer unlock()
	s.mu.Lock()
	lf, ok = s.open[k]
	s.mu.Unlock()
	if ok {
		return lf, nil // opened while this waited
	}
	p := s.path(k)
	var f *os.File
	var err error
	made := false // a new, empty file: nothing to rebuild
	if create {
		if err := mkdirPrivate(filepath.Dir(p)); err != nil {
			return nil, fmt.Errorf("open log %s: %w", k, err)
		}
		f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		made = err == nil
	}
	if !made {
		f, err = os.OpenFile(p, os.O_RDWR, 0o600)
	}
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", k, err)
	}
	// Explicitly, as the umask may have taken bits off, and a file an older version made
	// 0644 is narrowed too.
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open log %s: %w", k, err)
	}
	lf = &logFile{f: f, next: 1, used: time.Now()}
	if !made { // a new file has nothing to read back
		if err := lf.rebuild(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("open log %s: %w", k, err)
		}
	}
	s.mu.Lock()
	s.open[k] = lf
	s.mu.Unlock()
	return lf, nil
}

// mkdirPrivate creates dir and its missing parents with mode 0700, whatever the umask.
// Directories that exist already keep their mode.
func mkdirPrivate(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if parent := filepath.Dir(dir); parent != dir {
			if err := mkdirPrivate(parent); err != nil {
				return err
			}
		}
		err = os.Mkdir(dir, 0o700)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return os.Chmod(dir, 0o700)
}

// lockOpen takes k's open lock and returns the function that releases it.
func (s *FileStorage) lockOpen(k Key) func() {
	s.mu.Lock()
	o, ok := s.openers[k]
	if !ok {
		o = &opener{}
		s.openers[k] = o
	}
	o.n++
	s.mu.Unlock()
	o.mu.Lock()
	return func() {
		o.mu.Unlock()
		s.mu.Lock()
		if o.n--; o.n == 0 {
			delete(s.openers, k)
		}
		s.mu.Unlock()
	}
}

// rebuild scans the file for its end and index. A torn last line, left by a crash in
// the middle of a write, is cut off: its batch was never acknowledged.
func (lf *logFile) rebuild() error {
	// A buffer no larger than the file: most logs are small, and one is opened for every
	// job (new logs are empty).
	size := 256 << 10
	if fi, err := lf.f.Stat(); err == nil {
		size = int(min(int64(size), max(fi.Size(), 4096)))
	}
	r := bufio.NewReaderSize(io.NewSectionReader(lf.f, 0, 1<<62), size)
	var off int64
	for {
		b, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read the rest of it. b points into the
			// reader's buffer, which the next read overwrites, so copy it first.
			head := append([]byte(nil), b...)
			rest, err2 := r.ReadBytes('\n')
			b, err = append(head, rest...), err2
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		var l struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(b, &l) != nil || l.Seq != lf.next {
			break
		}
		if (lf.next-1)%indexEvery == 0 {
			lf.marks = append(lf.marks, mark{seq: lf.next, off: off})
		}
		lf.next++
		off += int64(len(b))
	}
	if err := lf.f.Truncate(off); err != nil {
		return err
	}
	lf.size = off
	return nil
}

// Append implements Storage.
func (s *FileStorage) Append(ctx context.Context, k Key, lines []Line) (State, error) {
	var lf *logFile
	for {
		var err error
		if lf, err = s.file(k, true); err != nil {
			return State{}, err
		}
		lf.mu.Lock()
		if !lf.closed {
			break
		}
		lf.mu.Unlock()
		// Closed but not yet forgotten (Finish, the idle sweep): forget it here rather
		// than wait, and open the file again.
		s.forget(k, lf)
	}
	defer lf.mu.Unlock()
	if lf.removed {
		return State{}, fmt.Errorf("append to log %s: it was purged", k)
	}
	lines, err := Trim(lines, lf.next)
	if err != nil {
		return lf.state(), err
	}
	if len(lines) == 0 {
		return lf.state(), nil
	}
	var b []byte
	off := lf.size
	for i := range lines {
		if (lines[i].Seq-1)%indexEvery == 0 {
			lf.marks = append(lf.marks, mark{seq: lines[i].Seq, off: off + int64(len(b))})
		}
		b = appendJSON(b, &lines[i])
	}
	if _, err := lf.f.WriteAt(b, off); err != nil {
		// Forget the marks of lines that did not make it; the next append overwrites
		// whatever part was written.
		for len(lf.marks) > 0 && lf.marks[len(lf.marks)-1].off >= off {
			lf.marks = lf.marks[:len(lf.marks)-1]
		}
		return lf.state(), fmt.Errorf("append to log %s: %w", k, err)
	}
	lf.size += int64(len(b))
	lf.next = lines[len(lines)-1].Seq + 1
	lf.dirty = !s.noSync // what is never synced is never waiting for it
	lf.used = time.Now()
	return lf.state(), nil
}

func (lf *logFile) state() State { return State{Next: lf.next, Bytes: lf.size} }

// State implements Storage.
func (s *FileStorage) State(ctx context.Context, k Key) (State, error) {
	lf, err := s.file(k, false)
	if err != nil || lf == nil {
		return State{Next: 1}, err
	}
	lf.mu.Lock()
	defer lf.mu.Unlock()
	return lf.state(), nil
}

// Refresh implements Storage: one process owns a directory, so what it knows is the
// end.
func (s *FileStorage) Refresh(ctx context.Context, k Key) (State, error) { return s.State(ctx, k) }

// Read implements Storage.
func (s *FileStorage) Read(ctx context.Context, k Key, afterSeq int64, max int) ([]Line, error) {
	lf, err := s.file(k, false)
	if err != nil || lf == nil {
		return nil, err
	}
	lf.mu.Lock()
	size, next := lf.size, lf.next
	var from int64
	if i := sort.Search(len(lf.marks), func(i int) bool { return lf.marks[i].seq > afterSeq+1 }); i > 0 {
		from = lf.marks[i-1].off
	}
	lf.mu.Unlock()
	if afterSeq+1 >= next {
		return nil, nil
	}
	// Read through a descriptor of its own: Finish may close lf.f meanwhile, and the file
	// only ever grows, so the bytes up to size stay valid.
	f, err := os.Open(s.path(k))
	if err != nil {
		return nil, fmt.Errorf("read log %s: %w", k, err)
	}
	defer f.Close()
	out, err := Decode(io.NewSectionReader(f, from, size-from), afterSeq, max, make([]Line, 0, min(max, 1024)))
	if err != nil {
		return out, fmt.Errorf("read log %s: %w", k, err)
	}
	return out, nil
}

// Finish implements Storage: the file is synced and closed.
func (s *FileStorage) Finish(ctx context.Context, k Key) error {
	s.mu.Lock()
	lf, ok := s.open[k]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	// Close before forgetting: while lf is in the map nobody opens the file again, and
	// a second logFile must not rebuild (and truncate) the file while an append through
	// lf is still writing it.
	err := lf.close()
	s.forget(k, lf)
	return err
}

// forget drops lf, once closed, from the open files.
func (s *FileStorage) forget(k Key, lf *logFile) {
	s.mu.Lock()
	if s.open[k] == lf {
		delete(s.open, k)
	}
	s.mu.Unlock()
}

func (lf *logFile) close() error {
	lf.syncMu.Lock()
	defer lf.syncMu.Unlock()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.closed {
		return nil
	}
	lf.closed = true
	var err error
	if lf.dirty {
		err = lf.f.Sync()
	}
	if cerr := lf.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Purge implements Storage: it deletes the attempts' files last written before t.
func (s *FileStorage) Purge(ctx context.Context, before time.Time) (int, error) {
	jobs, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("purge logs: %w", err)
	}
	n := 0
	for _, jd := range jobs {
		job, err := uuid.Parse(jd.Name())
		if err != nil || !jd.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.dir, jd.Name()))
		if err != nil {
			return n, fmt.Errorf("purge logs: %w", err)
		}
		left := len(files)
		for _, fe := range files {
			name, ok := strings.CutSuffix(fe.Name(), ".log")
			attempt, err := strconv.Atoi(name)
			if !ok || err != nil {
				continue
			}
			info, err := fe.Info()
			if err != nil || !info.ModTime().Before(before) {
				continue
			}
			k := Key{Job: job, Attempt: attempt}
			purged, err := s.purge(k, before)
			if err != nil {
				return n, fmt.Errorf("purge logs: %w", err)
			}
			if purged {
				n++
				left--
			}
		}
		if left == 0 {
			_ = os.Remove(filepath.Join(s.dir, jd.Name()))
		}
	}
	return n, nil
}

// purge deletes k's file if it was still last written before t. It holds k's open lock
// throughout, so that nobody opens the file again between its close and its removal
// (appends would go to a file about to be unlinked), and it checks the time again under
// the file's lock, so that a log written meanwhile stays.
func (s *FileStorage) purge(k Key, before time.Time) (bool, error) {
	defer s.lockOpen(k)()
	s.mu.Lock()
	lf, open := s.open[k]
	s.mu.Unlock()
	if open {
		lf.mu.Lock()
	}
	info, err := os.Stat(s.path(k))
	if err != nil || !info.ModTime().Before(before) {
		if open {
			lf.mu.Unlock()
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return false, err
	}
	if open {
		lf.removed = true
		lf.mu.Unlock()
		_ = lf.close()
		s.forget(k, lf)
	}
	if err := os.Remove(s.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// syncLoop fsyncs the files written since the last pass and closes idle ones.
func (s *FileStorage) syncLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.syncAll(false)
	}
}

func (s *FileStorage) syncAll(closeAll bool) {
	s.mu.Lock()
	files := make(map[Key]*logFile, len(s.open))
	for k, lf := range s.open {
		files[k] = lf
	}
	s.mu.Unlock()
	for k, lf := range files {
		lf.syncMu.Lock()
		lf.mu.Lock()
		if lf.closed {
			lf.mu.Unlock()
			lf.syncMu.Unlock()
			continue
		}
		// Sync without the file's lock: appends must not wait for the disk. Lines
		// appended while it runs mark the file dirty again for the next pass.
		dirty, f := lf.dirty, lf.f
		lf.dirty = false
		idle := time.Since(lf.used) > idleClose
		lf.mu.Unlock()
		if dirty {
			if err := f.Sync(); err != nil {
				s.log.Error("sync log file", "log", k.String(), "err", err)
				lf.mu.Lock()
				lf.dirty = true
				lf.mu.Unlock()
			}
		}
		lf.syncMu.Unlock()
		if idle || closeAll {
			// Close before forgetting, as Finish does.
			_ = lf.close()
			s.forget(k, lf)
		}
	}
}

// Close syncs and closes every open file.
func (s *FileStorage) Close() error {
	close(s.stop)
	<-s.done
	s.syncAll(true)
	return nil
}
