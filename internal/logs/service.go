package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/store/storeerr"
	"github.com/google/uuid"
)

// DefaultMaxBytes is how much log one job attempt may store unless configured.
const DefaultMaxBytes = 50 << 20

// MaxLineBytes is the longest line text the coordinator stores; longer text is cut and
// marked truncated (the worker cuts first, at the same length).
const MaxLineBytes = 64 << 10

// maxEncodedLine bounds a stored line's encoded size: JSON escapes a byte of text to at
// most six (\u00XX), plus the other fields.
const maxEncodedLine = 6*(MaxLineBytes+2*MaxAnnotationPropBytes) + 256

// noticeTopic is the store topic on which replicas announce log changes:
// "<origin> <job> <attempt> lines|end".
const noticeTopic = "logs"

// Config configures a Service.
type Config struct {
	Storage Storage
	// Notifier carries "new lines" and "ended" notices between coordinator replicas; nil
	// for a single coordinator.
	Notifier Notifier
	// MaxBytes caps what one job attempt stores (DefaultMaxBytes when zero); past it the
	// rest is dropped and a system line says so.
	MaxBytes int64
	Logger   *slog.Logger
	// Stored, when set, is told how many lines each append stored and the bytes of their
	// text (metrics).
	Stored func(lines int, bytes int64)
}

// Service is the coordinator's side of the log pipeline: it stores what workers send,
// once per seq, and serves readers from the live hub and from storage.
// Notifier carries notices between coordinator replicas; the store is one (store.Notifier
// says how they are delivered).
type Notifier interface {
	// Publish sends a notice on topic to its subscribers on every replica.
	Publish(ctx context.Context, topic, payload string) error
	// Subscribe returns a channel of topic's notices and a function to stop listening.
	Subscribe(topic string) (<-chan string, func())
}

type Service struct {
	cfg    Config
	hub    *Hub
	origin string
	log    *slog.Logger

	mu       sync.Mutex
	attempts map[Key]*attemptState
	secrets  SecretSource   // see UseSecrets
	annotate AnnotationSink // see UseAnnotations

	notices chan Key // keys with unannounced lines, for the notice loop
	stop    context.CancelFunc
	done    sync.WaitGroup
}

type attemptState struct {
	mu        sync.Mutex
	checked   bool // truncated is known
	truncated bool
	// masker masks the attempt's secret values; maskKnown says it was resolved, and
	// maskUsed when it was last used (see forgetIdleSecrets).
	masker    *masker
	maskKnown bool
	maskUsed  time.Time
}

// NewService starts a service; Close stops it.
func NewService(cfg Config) *Service {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, hub: NewHub(), origin: uuid.NewString()[:8], log: cfg.Logger,
		attempts: map[Key]*attemptState{}, notices: make(chan Key, 4096), stop: stop}
	s.done.Add(1)
	go s.sweep(ctx)
	if cfg.Notifier != nil {
		sub, unsubscribe := cfg.Notifier.Subscribe(noticeTopic)
		s.done.Add(2)
		go s.receive(ctx, sub, unsubscribe)
		go s.announce(ctx)
	}
	return s
}

// Close stops the service's loops; the storage is closed by its owner.
func (s *Service) Close() {
	s.stop()
	s.done.Wait()
}

// Hub returns the live hub readers wait on.
func (s *Service) Hub() *Hub { return s.hub }

func (s *Service) attempt(k Key) *attemptState {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.attempts[k]
	if !ok {
		a = &attemptState{}
		s.attempts[k] = a
	}
	return a
}

// Append stores a batch a worker sent for key and returns the seq it expects next and
// whether the log was truncated (the worker may then drop the rest). Lines already
// stored are skipped; a batch past the log's end is ErrGap, with next saying where to
// re-send from.
func (s *Service) Append(ctx context.Context, k Key, lines []Line) (next int64, truncated bool, err error) {
	for i := range lines {
		if err := lines[i].Valid(); err != nil {
			return 0, false, fmt.Errorf("%w: %v", storeerr.ErrInvalid, err)
		}
		if i > 0 && lines[i].Seq != lines[i-1].Seq+1 {
			return 0, false, fmt.Errorf("%w: seq %d follows %d; a batch must be dense", storeerr.ErrInvalid, lines[i].Seq, lines[i-1].Seq)
		}
		cut(&lines[i])
	}
	a := s.attempt(k)
	a.mu.Lock()
	defer a.mu.Unlock()
	st, err := s.cfg.Storage.State(ctx, k)
	if err != nil {
		return 0, false, err
	}
	var end int64
	var todo []Line
	for fresh := false; ; fresh = true {
		if !a.checked {
			if a.truncated, err = s.endsTruncated(ctx, k, st); err != nil {
				return 0, false, err
			}
			a.checked = true
		}
		end = st.Next
		if len(lines) > 0 {
			end = max(end, lines[len(lines)-1].Seq+1)
		}
		if a.truncated {
			return end, true, nil
		}
		todo, err = Trim(lines, st.Next)
		if err == nil && len(todo) > 0 {
			break
		}
		if err != nil && !errors.Is(err, ErrGap) || fresh {
			return st.Next, false, err
		}
		// A gap, or a batch stored already, by the end known here, which may be another
		// replica's past: the worker may have sent the lines in between, or after, there.
		// The storage decides, and whether that replica truncated the log meanwhile; the
		// answer tells the worker the true end.
		if st, err = s.cfg.Storage.Refresh(ctx, k); err != nil {
			return 0, false, err
		}
		a.checked = false
	}
	if err := s.maskSecrets(ctx, k, a, todo); err != nil {
		return 0, false, fmt.Errorf("mask the log's secrets: %w", err)
	}
	// Encoding every line to measure it would double the cost of an append, so the
	// lines are measured only when even their largest encoding might not fit.
	used, trunc, bound := st.Bytes, false, st.Bytes
	for i := range todo {
		bound += maxEncoded(&todo[i])
	}
	for i := 0; bound > s.cfg.MaxBytes && i < len(todo); i++ {
		n := int64(len(appendJSON(nil, &todo[i])))
		if used+n > s.cfg.MaxBytes {
			todo = append(todo[:i:i], Line{Seq: todo[i].Seq, TS: todo[i].TS, Stream: System, Truncated: true,
				Text: fmt.Sprintf("log truncated: this attempt reached the limit of %s; later output is dropped", size(s.cfg.MaxBytes))})
			trunc = true
			break
		}
		used += n
	}
	if err := s.keepAnnotations(ctx, k, todo); err != nil {
		return 0, false, err
	}
	after, err := s.cfg.Storage.Append(ctx, k, todo)
	if err != nil {
		if errors.Is(err, ErrGap) {
			return after.Next, false, err
		}
		return 0, false, err
	}
	s.hub.Publish(k, todo)
	s.announceLater(k)
	if s.cfg.Stored != nil {
		var n int64
		for i := range todo {
			n += int64(len(todo[i].Text))
		}
		s.cfg.Stored(len(todo), n)
	}
	if trunc {
		a.truncated = true
		return end, true, nil
	}
	return after.Next, false, nil
}

// AnnotationSink keeps the annotations of a job attempt's lines (each Line.Annotated);
// it must skip a line's annotation it already kept, as a batch may be sent again.
type AnnotationSink func(ctx context.Context, k Key, lines []Line) error

// UseAnnotations makes the service hand the annotated lines of every batch to sink, after
// masking and before storing them: a batch whose annotations were not kept is not stored,
// so the worker sends it again and nothing is lost.
func (s *Service) UseAnnotations(sink AnnotationSink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.annotate = sink
}

func (s *Service) keepAnnotations(ctx context.Context, k Key, lines []Line) error {
	s.mu.Lock()
	sink := s.annotate
	s.mu.Unlock()
	if sink == nil {
		return nil
	}
	var annotated []Line
	for i := range lines {
		if lines[i].Annotated() {
			annotated = append(annotated, lines[i])
		}
	}
	if len(annotated) == 0 {
		return nil
	}
	if err := sink(ctx, k, annotated); err != nil {
		return fmt.Errorf("keep the log's annotations: %w", err)
	}
	return nil
}

// maxEncoded bounds l's stored size, as maxEncodedLine does for any line.
func maxEncoded(l *Line) int64 {
	n := 6*int64(len(l.Text)) + 256
	if a := l.Annotation; a != nil {
		n += 6 * int64(len(a.Title)+len(a.File))
	}
	return n
}

// cut caps a line's text at MaxLineBytes, on a character boundary, and makes it valid
// UTF-8.
func cut(l *Line) {
	if len(l.Text) > MaxLineBytes {
		t := l.Text[:MaxLineBytes]
		for len(t) > 0 && !utf8.RuneStart(t[len(t)-1]) {
			t = t[:len(t)-1]
		}
		if len(t) > 0 {
			t = t[:len(t)-1]
		}
		l.Text, l.Truncated = t, true
	}
	if !utf8.ValidString(l.Text) {
		l.Text = strings.ToValidUTF8(l.Text, "\uFFFD")
	}
	if a := l.Annotation; a != nil {
		a.Title = cutUTF8(strings.ToValidUTF8(a.Title, "\uFFFD"), MaxAnnotationPropBytes)
		a.File = cutUTF8(strings.ToValidUTF8(a.File, "\uFFFD"), MaxAnnotationPropBytes)
	}
}

// endsTruncated reads whether key's stored log ends with the truncation line.
func (s *Service) endsTruncated(ctx context.Context, k Key, st State) (bool, error) {
	// The line that did not fit may have been up to maxEncodedLine long, so the log can
	// have been cut that far below the limit.
	if st.Next <= 1 || st.Bytes < s.cfg.MaxBytes-maxEncodedLine {
		return false, nil
	}
	last, err := s.cfg.Storage.Read(ctx, k, st.Next-2, 1)
	if err != nil {
		return false, err
	}
	return len(last) == 1 && last[0].Stream == System && last[0].Truncated, nil
}

func size(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// End is called when a job attempt has ended, after its last lines were stored: the log
// is made durable and compact, and its readers are told.
func (s *Service) End(ctx context.Context, k Key) error {
	err := s.cfg.Storage.Finish(ctx, k)
	s.hub.End(k)
	s.mu.Lock()
	delete(s.attempts, k)
	s.mu.Unlock()
	if s.cfg.Notifier != nil {
		if perr := s.cfg.Notifier.Publish(ctx, noticeTopic, s.notice(k, "end")); perr != nil {
			s.log.Warn("announce log end", "log", k.String(), "err", perr)
		}
	}
	return err
}

// Read returns up to max lines after afterSeq: from the hub's window when it has them,
// from storage otherwise.
func (s *Service) Read(ctx context.Context, k Key, afterSeq int64, max int) ([]Line, error) {
	if lines, ok := s.hub.Lines(k, afterSeq, max); ok {
		return lines, nil
	}
	return s.cfg.Storage.Read(ctx, k, afterSeq, max)
}

// Tail returns the last n lines of key's log, in order; fewer when it is shorter. It asks
// the storage where the log ends past any cache, so a finished log's tail is its end.
func (s *Service) Tail(ctx context.Context, k Key, n int) ([]Line, error) {
	st, err := s.cfg.Storage.Refresh(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("tail of the log of job %s attempt %d: %w", k.Job, k.Attempt, err)
	}
	after := max(st.Next-1-int64(n), 0)
	return s.Read(ctx, k, after, n)
}

// Matcher selects lines for a search.
type Matcher func(text string) bool

// NewMatcher matches q as a substring or, with regex, as a regular expression (RE2
// syntax); ignoreCase makes either case-insensitive.
func NewMatcher(q string, regex, ignoreCase bool) (Matcher, error) {
	if regex {
		if ignoreCase {
			q = "(?i)" + q
		}
		re, err := regexp.Compile(q)
		if err != nil {
			return nil, fmt.Errorf("%w: regular expression: %v", storeerr.ErrInvalid, err)
		}
		return re.MatchString, nil
	}
	if ignoreCase {
		lq := strings.ToLower(q)
		return func(t string) bool { return strings.Contains(strings.ToLower(t), lq) }, nil
	}
	return func(t string) bool { return strings.Contains(t, q) }, nil
}

// Search returns up to limit lines after afterSeq whose text m matches.
func (s *Service) Search(ctx context.Context, k Key, m Matcher, afterSeq int64, limit int) ([]Line, error) {
	var out []Line
	for len(out) < limit {
		page, err := s.Read(ctx, k, afterSeq, 4096)
		if err != nil {
			return out, err
		}
		if len(page) == 0 {
			break
		}
		for _, l := range page {
			if m(l.Text) {
				out = append(out, l)
				if len(out) == limit {
					break
				}
			}
		}
		afterSeq = page[len(page)-1].Seq
	}
	return out, nil
}

// Purge deletes logs last written before t.
func (s *Service) Purge(ctx context.Context, before time.Time) (int, error) {
	return s.cfg.Storage.Purge(ctx, before)
}

func (s *Service) notice(k Key, what string) string {
	return s.origin + " " + k.Job.String() + " " + strconv.Itoa(k.Attempt) + " " + what
}

// announceLater queues a "new lines" notice for the other replicas.
func (s *Service) announceLater(k Key) {
	if s.cfg.Notifier == nil {
		return
	}
	select {
	case s.notices <- k:
	default:
		// The loop is behind; readers elsewhere still see the lines at their next notice
		// or keep-alive check.
	}
}

// announce sends the queued notices, one per log however many batches arrived while
// the previous round was being sent.
func (s *Service) announce(ctx context.Context) {
	defer s.done.Done()
	for {
		var first Key
		select {
		case <-ctx.Done():
			return
		case first = <-s.notices:
		}
		keys := map[Key]bool{first: true}
	more:
		for {
			select {
			case k := <-s.notices:
				keys[k] = true
			default:
				break more
			}
		}
		for k := range keys {
			if err := s.cfg.Notifier.Publish(ctx, noticeTopic, s.notice(k, "lines")); err != nil && ctx.Err() == nil {
				s.log.Warn("announce log lines", "log", k.String(), "err", err)
			}
		}
	}
}

// receive wakes this replica's readers when another replica announces lines or an end.
func (s *Service) receive(ctx context.Context, sub <-chan string, unsubscribe func()) {
	defer s.done.Done()
	defer unsubscribe()
	for {
		var msg string
		select {
		case <-ctx.Done():
			return
		case msg = <-sub:
		}
		f := strings.Fields(msg)
		if len(f) != 4 || f[0] == s.origin {
			continue
		}
		job, err := uuid.Parse(f[1])
		attempt, err2 := strconv.Atoi(f[2])
		if err != nil || err2 != nil {
			continue
		}
		s.hub.Poke(Key{Job: job, Attempt: attempt}, f[3] == "end")
	}
}

func (s *Service) sweep(ctx context.Context) {
	defer s.done.Done()
	t := time.NewTicker(feedIdle / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.hub.Sweep()
			s.forgetIdleSecrets(time.Now().Add(-secretsIdle))
		}
	}
}
