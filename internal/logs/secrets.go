package logs

import (
	"context"
	"time"
)

// MaskSecret registers a delivered secret value: the value, each of its lines, and the
// encoded forms masker.addSecret lists (JSON-escaped, percent-encoded, hex, and base64 at
// any alignment).
func (r *Recorder) MaskSecret(value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rescan(r.masker.addSecret(value))
}

// HoldsSecret reports whether text holds a registered secret in any form the Recorder
// masks, that is whether masking would change it; what is too short to be masked does
// not count, so the two always agree. Text of many lines is read as one: a form that
// spans lines counts too.
func (r *Recorder) HoldsSecret(text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	masked, _ := r.masker.mask(nil, []byte(text), true)
	return string(masked) != text
}

// SecretSource resolves the secret values a job attempt was given, for a coordinator
// that did not hand the attempt out itself (another replica did, or it restarted).
type SecretSource func(ctx context.Context, k Key) ([]string, error)

// UseSecrets makes the service mask, in every line it stores, the secret values of the
// line's job attempt: those Remember was given, else what src resolves. It is defense in
// depth: a worker masks them before they are sent, unless it is too old to know them.
func (s *Service) UseSecrets(src SecretSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = src
}

// RememberSecrets keeps the values handed out with attempt k in memory until the
// attempt's log ends (End), so its lines are masked without asking the store.
func (s *Service) RememberSecrets(k Key, values []string) {
	m := newSecretMasker(values)
	a := s.attempt(k)
	a.mu.Lock()
	a.masker, a.maskKnown, a.maskUsed = m, true, time.Now()
	a.mu.Unlock()
}

// secretsIdle is how long an attempt's secret values stay in memory without a log batch
// to mask: an attempt whose end this service never sees (it completed on another
// replica, its lease was lost, its claim answer never arrived) does not keep them for
// ever. A later batch resolves them again.
const secretsIdle = 5 * time.Minute

// forgetIdleSecrets drops the secret values of attempts not used since before.
func (s *Service) forgetIdleSecrets(before time.Time) {
	s.mu.Lock()
	states := make([]*attemptState, 0, len(s.attempts))
	for _, a := range s.attempts {
		states = append(states, a)
	}
	s.mu.Unlock()
	for _, a := range states {
		a.mu.Lock()
		if a.maskKnown && a.maskUsed.Before(before) {
			a.masker, a.maskKnown = nil, false
		}
		a.mu.Unlock()
	}
}

// MaskText masks text with the secret values of attempt k, as Append masks a line of its
// log, read as one line however many it has: for what a worker sends of an attempt
// besides its log (a step's summary). A failure to resolve the values is an error, and
// the caller should refuse the text rather than keep it unmasked.
func (s *Service) MaskText(ctx context.Context, k Key, text string) (string, error) {
	a := s.attempt(k)
	a.mu.Lock()
	defer a.mu.Unlock()
	lines := []Line{{Text: text}}
	if err := s.maskSecrets(ctx, k, a, lines); err != nil {
		return "", err
	}
	return lines[0].Text, nil
}

func newSecretMasker(values []string) *masker {
	m := &masker{}
	for _, v := range values {
		m.addSecret(v)
	}
	return m
}

// maskSecrets masks lines with the attempt's secrets, resolving them first when this
// service has not yet. Callers hold a.mu. A failure to resolve refuses the batch: the
// worker sends it again rather than it being stored unmasked.
func (s *Service) maskSecrets(ctx context.Context, k Key, a *attemptState, lines []Line) error {
	if !a.maskKnown {
		s.mu.Lock()
		src := s.secrets
		s.mu.Unlock()
		if src == nil {
			return nil
		}
		values, err := src(ctx, k)
		if err != nil {
			return err
		}
		a.masker, a.maskKnown = newSecretMasker(values), true
	}
	a.maskUsed = time.Now()
	if a.masker.empty() {
		return nil
	}
	mask := func(s string) string {
		masked, _ := a.masker.mask(nil, []byte(s), true)
		return string(masked)
	}
	for i := range lines {
		lines[i].Text = mask(lines[i].Text)
		if an := lines[i].Annotation; an != nil {
			// A copy: the caller's batch may share the annotation.
			c := *an
			c.Title, c.File = mask(c.Title), mask(c.File)
			lines[i].Annotation = &c
		}
	}
	return nil
}
