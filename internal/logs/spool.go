package logs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// spool is the on-disk queue of a Shipper: NDJSON lines in seq order, appended by Add and
// read back batch by batch by the sender, so memory does not grow with an outage. It is
// not synced: it rides out coordinator outages, not worker crashes. For the same reason
// the records of a small backlog may be held in memory (hold) and written only once the
// backlog grows (append, flush): a write per line would cost a system call per line,
// and can stall on a busy disk while the step's output waits.
//
// The file is made by the first write: most jobs' logs are sent before there is a
// backlog to write, and a file made and removed for each of them costs two writes to the
// file system's journal per job.
//
// Writes (append, flush, truncate) are serialised by the Shipper's lock. Reads use
// ReadAt below the size the caller saw under that lock, with nothing held, so they need
// no lock: appends only add bytes past it, and only the sender, which is also the only
// reader, truncates.
type spool struct {
	dir  string
	f    atomic.Pointer[os.File] // nil until the first write
	size int64                   // bytes of complete records, written or held
	held []byte                  // the records past the file's end, not written yet
}

// written is how many bytes of records the file holds.
func (s *spool) written() int64 { return s.size - int64(len(s.held)) }

// hold adds encoded records without writing them.
func (s *spool) hold(b []byte) {
	s.held = append(s.held, b...)
	s.size += int64(len(b))
}

// flush writes the held records. On failure it cuts the file back and keeps them held.
func (s *spool) flush() error {
	if len(s.held) == 0 {
		return nil
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	off := s.written()
	if _, err := f.WriteAt(s.held, off); err != nil {
		_ = f.Truncate(off)
		return fmt.Errorf("append to log spool %s: %w", f.Name(), err)
	}
	s.held = s.held[:0]
	return nil
}

// openSpool checks that dir is a directory, where the spool's file will be made.
func openSpool(dir string) (*spool, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("log spool directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("log spool directory %s: not a directory", dir)
	}
	return &spool{dir: dir}, nil
}

// file returns the spool's file, making it on first use. Callers hold the Shipper's lock.
func (s *spool) file() (*os.File, error) {
	if f := s.f.Load(); f != nil {
		return f, nil
	}
	f, err := os.CreateTemp(s.dir, "gantry-log-*.ndjson")
	if err != nil {
		return nil, fmt.Errorf("create log spool: %w", err)
	}
	s.f.Store(f)
	return f, nil
}

// append writes the held records and then b at the end. On failure it cuts the file
// back, so a partial record never reaches a reader, and b is not added.
func (s *spool) append(b []byte) error {
	if err := s.flush(); err != nil {
		return err
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, s.size); err != nil {
		_ = f.Truncate(s.size)
		return fmt.Errorf("append to log spool %s: %w", f.Name(), err)
	}
	s.size += int64(len(b))
	return nil
}

// reset empties the spool once everything in it is acknowledged.
func (s *spool) reset() error {
	if f := s.f.Load(); f != nil && s.written() > 0 {
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("truncate log spool %s: %w", f.Name(), err)
		}
	}
	s.size = 0
	s.held = s.held[:0]
	return nil
}

// remove closes and deletes the spool file, if one was made.
func (s *spool) remove() error {
	f := s.f.Load()
	if f == nil {
		return nil
	}
	name := f.Name()
	cerr := f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("remove log spool: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("close log spool %s: %w", name, cerr)
	}
	return nil
}

// spoolPos is a record boundary in the spool: its byte offset and how many records lie
// before it.
type spoolPos struct {
	off int64
	idx int64
}

// spoolReader reads records from pos up to end (exclusive) without buffering more than
// one bufio buffer.
type spoolReader struct {
	br  *bufio.Reader
	pos spoolPos
	end int64
}

func (s *spool) reader(from spoolPos, end int64) *spoolReader {
	var ra io.ReaderAt = noFile{}
	if f := s.f.Load(); f != nil {
		ra = f
	}
	sr := io.NewSectionReader(ra, from.off, end-from.off)
	return &spoolReader{br: bufio.NewReaderSize(sr, 32<<10), pos: from, end: end}
}

// noFile is the spool before its file is made: it holds nothing, and a reader of it
// reads only below a size of 0.
type noFile struct{}

func (noFile) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }

// next returns the next record (with its newline) and decodes it into l; io.EOF at end.
// The record is valid until the next call.
func (r *spoolReader) next(l *Line) ([]byte, error) {
	if r.pos.off >= r.end {
		return nil, io.EOF
	}
	rec, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A record longer than the buffer: collect it whole.
		buf := append([]byte(nil), rec...)
		for err == bufio.ErrBufferFull {
			rec, err = r.br.ReadSlice('\n')
			buf = append(buf, rec...)
		}
		rec = buf
	}
	if err != nil {
		return nil, fmt.Errorf("read log spool at %d: %w", r.pos.off, err)
	}
	*l = Line{}
	if err := json.Unmarshal(rec, l); err != nil {
		return nil, fmt.Errorf("decode log spool record at %d: %w", r.pos.off, err)
	}
	r.pos.off += int64(len(rec))
	r.pos.idx++
	return rec, nil
}

// seek returns the position of the first record from start on whose seq is at least seq,
// or the end position if there is none.
func (s *spool) seek(start spoolPos, end int64, seq int64) (spoolPos, error) {
	r := s.reader(start, end)
	for {
		before := r.pos
		var l Line
		if _, err := r.next(&l); err == io.EOF {
			return before, nil
		} else if err != nil {
			return before, err
		}
		if l.Seq >= seq {
			return before, nil
		}
	}
}
