package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

// testInsertRows is how many results one INSERT statement adds: a batch is cut into
// statements of this many rows, then of halving sizes for the rest, so that a few
// statement shapes are prepared however long the batches.
const testInsertRows = 256

const testResultCols = `job_id, attempt, idx, run_id, project_id, branch, sha, suite, name, file, line, status,
	duration_us, failed_attempts, message, output, created_at`

// checkTestResult says what is wrong with a result the store is asked to keep.
func checkTestResult(r *testreport.Result) string {
	switch {
	case !r.Status.Valid():
		return fmt.Sprintf("status %q is not passed, failed, skipped or errored", r.Status)
	case r.Name == "":
		return "the test has no name"
	case len(r.Name) > testreport.MaxNameBytes || len(r.Suite) > testreport.MaxNameBytes || len(r.File) > testreport.MaxNameBytes:
		return fmt.Sprintf("a suite, name or file is longer than %d bytes", testreport.MaxNameBytes)
	case len(r.Message) > testreport.MaxMessageBytes:
		return fmt.Sprintf("the message is longer than %d bytes", testreport.MaxMessageBytes)
	case len(r.Output) > testreport.MaxOutputBytes:
		return fmt.Sprintf("the output is longer than %d bytes", testreport.MaxOutputBytes)
	case r.Line < 0 || r.Line > testreport.MaxLine || r.Duration < 0 || r.Duration > testreport.MaxDuration || r.FailedAttempts < 0:
		return "a line, duration or count of failed attempts out of range"
	}
	for _, s := range []string{r.Suite, r.Name, r.File, r.Message, r.Output} {
		// PostgreSQL's text holds neither; SQLite is held to the same rule.
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return "a text that is not UTF-8 without NUL"
		}
	}
	return ""
}

// AddTestResults implements store.TestResults.
func (e *Engine) AddTestResults(ctx context.Context, p store.AddTestResultsParams) (int, error) {
	if p.First < 0 || p.First+len(p.Results) > store.MaxTestResults {
		return 0, fmt.Errorf("add test results of job %s: results %d to %d: an attempt keeps results 0 to %d: %w",
			p.JobID, p.First, p.First+len(p.Results)-1, store.MaxTestResults-1, store.ErrInvalid)
	}
	for i := range p.Results {
		if msg := checkTestResult(&p.Results[i]); msg != "" {
			return 0, fmt.Errorf("add test results of job %s: result %d (%s): %s: %w", p.JobID, p.First+i, p.Results[i].Name, msg, store.ErrInvalid)
		}
	}
	var added int
	// A batch of results is a write of its own: thousands of rows must not hold up the
	// small writes batched with them.
	err := e.writeAlone(ctx, func(t *tx) error {
		added = 0
		var (
			runID, projectID uuid.UUID
			attempt          int
			branch, trigger  string
		)
		err := t.row(`SELECT j.run_id, j.attempt, r.project_id, r.branch, r.trigger FROM jobs j JOIN runs r ON r.id = j.run_id
			WHERE j.id = ? AND j.lease_token = ? AND j.lease_token <> '' AND j.status IN ('assigned', 'running')`,
			p.JobID, p.Token).Scan(&runID, &attempt, &projectID, &branch, &trigger)
		if isNoRows(err) {
			return t.leaseError(p.JobID)
		}
		if err != nil {
			return err
		}
		var tr store.Trigger
		if err := json.Unmarshal([]byte(trigger), &tr); err != nil {
			return fmt.Errorf("read the run's trigger: %w", err)
		}
		sha, now := tr.StatusSHA(), us(e.clock.Now())
		for rest, at := p.Results, p.First; len(rest) > 0; {
			n := testInsertRows
			for n > len(rest) {
				n /= 2
			}
			var b strings.Builder
			conflict := ` ON CONFLICT (job_id, attempt, idx) DO NOTHING`
			if e.d.InsertOrIgnore {
				b.WriteString(`INSERT OR IGNORE INTO test_results (` + testResultCols + `) VALUES `)
				conflict = ""
			} else {
				b.WriteString(`INSERT INTO test_results (` + testResultCols + `) VALUES `)
			}
			args := make([]any, 0, 17*n)
			for i, r := range rest[:n] {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
				msg, out := r.Message, r.Output
				if r.Status == testreport.Passed && r.FailedAttempts == 0 {
					msg, out = "", ""
				}
				args = append(args, p.JobID, attempt, at+i, runID, projectID, branch, sha, r.Suite, r.Name, r.File, r.Line,
					string(r.Status), r.Duration.Microseconds(), r.FailedAttempts, msg, out, now)
			}
			b.WriteString(conflict)
			res, err := t.exec(b.String(), args...)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			added += int(k)
			rest, at = rest[n:], at+n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("add test results of job %s: %w", p.JobID, err)
	}
	return added, nil
}

// testResultSelect reads a result with its run's number and its job's key.
const testResultSelect = `SELECT t.job_id, t.attempt, t.idx, t.run_id, r.number, p.name, t.branch, t.sha, j.key, t.suite, t.name,
	t.file, t.line, t.status, t.duration_us, t.failed_attempts, t.message, t.output, t.created_at
	FROM test_results t JOIN jobs j ON j.id = t.job_id JOIN runs r ON r.id = t.run_id JOIN projects p ON p.id = t.project_id`

func scanTestResult(s scanner) (*store.TestResult, error) {
	var (
		r        store.TestResult
		status   string
		duration int64
		created  int64
	)
	if err := s.Scan(&r.JobID, &r.Attempt, &r.Index, &r.RunID, &r.RunNumber, &r.Project, &r.Branch, &r.SHA, &r.Job,
		&r.Suite, &r.Name, &r.File, &r.Line, &status, &duration, &r.FailedAttempts, &r.Message, &r.Output, &created); err != nil {
		return nil, err
	}
	r.Status = testreport.Status(status)
	r.Duration = time.Duration(duration) * time.Microsecond
	r.CreatedAt = fromUS(created)
	return &r, nil
}

func (e *Engine) queryTestResults(ctx context.Context, q string, args ...any) ([]*store.TestResult, error) {
	rows, err := e.readRows(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.TestResult
	for rows.Next() {
		r, err := scanTestResult(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// testStatusOrder sorts failing results first, then skipped, then passed.
const testStatusOrder = `CASE t.status WHEN 'errored' THEN 0 WHEN 'failed' THEN 0 WHEN 'skipped' THEN 1 ELSE 2 END`

// testResultsScope is the WHERE clause of a run's or a job attempt's results.
func (e *Engine) testResultsScope(ctx context.Context, p store.ListTestResultsParams) (string, []any, error) {
	switch {
	case p.JobID != uuid.Nil:
		attempt := p.Attempt
		if attempt <= 0 {
			err := e.readRow(ctx, `SELECT attempt FROM jobs WHERE id = ?`, p.JobID).Scan(&attempt)
			if isNoRows(err) {
				return "", nil, fmt.Errorf("job %s: %w", p.JobID, store.ErrNotFound)
			}
			if err != nil {
				return "", nil, fmt.Errorf("job %s: %w", p.JobID, err)
			}
		}
		return `t.job_id = ? AND t.attempt = ?`, []any{p.JobID, attempt}, nil
	case p.RunID != uuid.Nil:
		return `t.run_id = ? AND t.attempt = j.attempt`, []any{p.RunID}, nil
	}
	return "", nil, fmt.Errorf("a run or a job is required: %w", store.ErrInvalid)
}

// ListTestResults implements store.TestResults.
func (e *Engine) ListTestResults(ctx context.Context, p store.ListTestResultsParams) ([]*store.TestResult, error) {
	where, args, err := e.testResultsScope(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list test results: %w", err)
	}
	if len(p.Statuses) > 0 {
		where += ` AND t.status IN (` + inList(len(p.Statuses)) + `)`
		for _, s := range p.Statuses {
			args = append(args, string(s))
		}
	}
	order := testStatusOrder + `, j.seq, t.suite, t.name, t.idx`
	if p.BySlowest {
		order = `t.duration_us DESC, t.suite, t.name, j.seq, t.idx`
	}
	q := testResultSelect + ` WHERE ` + where + ` ORDER BY ` + order
	if p.Limit > 0 {
		q += ` LIMIT ? OFFSET ?`
		args = append(args, p.Limit, max(p.Offset, 0))
	}
	out, err := e.queryTestResults(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list test results: %w", err)
	}
	return out, nil
}

// CountTestResults implements store.TestResults.
func (e *Engine) CountTestResults(ctx context.Context, p store.ListTestResultsParams) (map[testreport.Status]int, error) {
	where, args, err := e.testResultsScope(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("count test results: %w", err)
	}
	rows, err := e.readRows(ctx, `SELECT t.status, COUNT(*) FROM test_results t JOIN jobs j ON j.id = t.job_id WHERE `+where+
		` GROUP BY t.status`, args...)
	if err != nil {
		return nil, fmt.Errorf("count test results: %w", err)
	}
	defer rows.Close()
	out := map[testreport.Status]int{}
	for rows.Next() {
		var (
			s string
			n int
		)
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count test results: %w", err)
		}
		out[testreport.Status(s)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count test results: %w", err)
	}
	return out, nil
}

// projectIDOf looks a project up by name for a read.
func (e *Engine) projectIDOf(ctx context.Context, name string) (uuid.UUID, error) {
	var id uuid.UUID
	err := e.readRow(ctx, `SELECT id FROM projects WHERE name = ?`, name).Scan(&id)
	if isNoRows(err) {
		return uuid.Nil, fmt.Errorf("project %q: %w", name, store.ErrNotFound)
	}
	return id, err
}

// TestHistory implements store.TestResults.
func (e *Engine) TestHistory(ctx context.Context, p store.TestHistoryParams) ([]*store.TestResult, error) {
	pid, err := e.projectIDOf(ctx, p.Project)
	if err != nil {
		return nil, fmt.Errorf("test history: %w", err)
	}
	q := testResultSelect + ` WHERE t.project_id = ? AND t.name = ? AND t.suite = ?`
	args := []any{pid, p.Test.Name, p.Test.Suite}
	if p.Branch != "" {
		q += ` AND t.branch = ?`
		args = append(args, p.Branch)
	}
	if !p.Before.IsZero() {
		q += ` AND t.created_at < ?`
		args = append(args, us(p.Before))
	}
	limit := p.Limit
	if limit <= 0 || limit > store.MaxTestHistory {
		limit = store.MaxTestHistory
	}
	q += ` ORDER BY t.created_at DESC, t.job_id DESC, t.attempt DESC, t.idx DESC LIMIT ?`
	out, err := e.queryTestResults(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("test history of %s: %w", p.Test, err)
	}
	return out, nil
}

// TestEvidence implements store.TestResults.
func (e *Engine) TestEvidence(ctx context.Context, p store.TestEvidenceParams) (map[testreport.TestID]*store.TestEvidence, error) {
	if len(p.Tests) > store.MaxEvidenceTests {
		return nil, fmt.Errorf("test evidence: %d tests, more than %d: %w", len(p.Tests), store.MaxEvidenceTests, store.ErrInvalid)
	}
	pid, err := e.projectIDOf(ctx, p.Project)
	if err != nil {
		return nil, fmt.Errorf("test evidence: %w", err)
	}
	out := map[testreport.TestID]*store.TestEvidence{}
	ev := func(id testreport.TestID) *store.TestEvidence {
		if out[id] == nil {
			out[id] = &store.TestEvidence{}
		}
		return out[id]
	}
	for _, id := range p.Tests {
		// A test at a time, each one index range: the tests judged are a run's failing
		// ones, and a lookup per test keeps every read bounded however long the history.
		if p.SHA != "" {
			rs, err := e.queryTestResults(ctx, testResultSelect+` WHERE t.project_id = ? AND t.sha = ? AND t.name = ? AND t.suite = ?
				ORDER BY t.created_at, t.idx LIMIT ?`, pid, p.SHA, id.Name, id.Suite, store.MaxTestHistory)
			if err != nil {
				return nil, fmt.Errorf("test evidence of %s on %s: %w", id, p.SHA, err)
			}
			if len(rs) > 0 {
				ev(id).OnCommit = rs
			}
		}
		for _, br := range []struct {
			name string
			into func(*store.TestEvidence, *store.TestResult)
		}{
			{p.Branch, func(e *store.TestEvidence, r *store.TestResult) { e.LastOnBranch = r }},
			{p.DefaultBranch, func(e *store.TestEvidence, r *store.TestResult) { e.LastOnDefault = r }},
		} {
			if br.name == "" {
				continue
			}
			rs, err := e.TestHistory(ctx, store.TestHistoryParams{Project: p.Project, Test: id, Branch: br.name, Before: p.Before, Limit: 1})
			if err != nil {
				return nil, err
			}
			if len(rs) > 0 {
				br.into(ev(id), rs[0])
			}
		}
	}
	return out, nil
}

// FlakyTests implements store.TestResults.
func (e *Engine) FlakyTests(ctx context.Context, p store.FlakyTestsParams) ([]*store.FlakyTest, error) {
	pid, err := e.projectIDOf(ctx, p.Project)
	if err != nil {
		return nil, fmt.Errorf("flaky tests: %w", err)
	}
	limit := p.Limit
	if limit <= 0 || limit > store.MaxTestHistory {
		limit = store.MaxTestHistory
	}
	// The failures since p.Since (a partial index holds only those, and the passes after
	// failed reruns) that have a pass of the same test on the same commit: a pass after
	// reruns is both by itself.
	one, args := "", []any{pid, us(p.Since)}
	if p.Test.Name != "" {
		one, args = ` AND t.name = ? AND t.suite = ?`, append(args, p.Test.Name, p.Test.Suite)
	}
	rows, err := e.readRows(ctx, `SELECT t.suite, t.name, t.sha, MAX(t.created_at) FROM test_results t
		WHERE t.project_id = ? AND t.created_at >= ? AND (t.status IN ('failed', 'errored') OR t.failed_attempts > 0)
		AND t.sha <> ''`+one+`
		AND EXISTS (SELECT 1 FROM test_results o WHERE o.project_id = t.project_id AND o.sha = t.sha
			AND o.name = t.name AND o.suite = t.suite AND o.status = 'passed')
		GROUP BY t.suite, t.name, t.sha ORDER BY MAX(t.created_at) DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("flaky tests: %w", err)
	}
	type flip struct {
		id   testreport.TestID
		sha  string
		last int64
	}
	var flips []flip
	for rows.Next() {
		var f flip
		if err := rows.Scan(&f.id.Suite, &f.id.Name, &f.sha, &f.last); err != nil {
			rows.Close()
			return nil, fmt.Errorf("flaky tests: %w", err)
		}
		flips = append(flips, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("flaky tests: %w", err)
	}
	var out []*store.FlakyTest
	byID := map[testreport.TestID]*store.FlakyTest{}
	for _, f := range flips {
		ft := byID[f.id]
		if ft == nil {
			if len(out) == limit {
				continue
			}
			ft = &store.FlakyTest{Test: f.id, LastSeen: fromUS(f.last)}
			byID[f.id] = ft
			out = append(out, ft)
		}
		ft.Commits++
		if ft.Commits > 3 {
			// The evidence of the latest three commits says enough; the count says the rest.
			continue
		}
		rs, err := e.queryTestResults(ctx, testResultSelect+` WHERE t.project_id = ? AND t.sha = ? AND t.name = ? AND t.suite = ?
			ORDER BY t.created_at DESC, t.idx DESC LIMIT 20`, pid, f.sha, f.id.Name, f.id.Suite)
		if err != nil {
			return nil, fmt.Errorf("flaky tests: evidence of %s: %w", f.id, err)
		}
		ft.Evidence = append(ft.Evidence, rs...)
	}
	return out, nil
}

// DeleteTestResultsBefore implements store.TestResults.
func (e *Engine) DeleteTestResultsBefore(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := e.writeAlone(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM test_results WHERE created_at < ?`, us(before))
		if err != nil {
			return fmt.Errorf("delete old test results: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

const quarantineCols = `q.suite, q.name, q.owner, q.reason, q.created_by, q.created_at, q.expires_at`

// PutQuarantine implements store.Quarantines.
func (e *Engine) PutQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, error) {
	q, _, err := e.putQuarantine(ctx, p, false)
	return q, err
}

// AddQuarantine implements store.Quarantines.
func (e *Engine) AddQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, bool, error) {
	return e.putQuarantine(ctx, p, true)
}

// putQuarantine quarantines p.Test; keep leaves a quarantine in force as it is, and
// records the audit entry ctx carries when it adds one.
func (e *Engine) putQuarantine(ctx context.Context, p store.PutQuarantineParams, keep bool) (*store.Quarantine, bool, error) {
	now := e.clock.Now()
	check := testreport.Result{Suite: p.Test.Suite, Name: p.Test.Name, Status: testreport.Passed, Message: p.Reason}
	switch {
	case checkTestResult(&check) != "":
		return nil, false, fmt.Errorf("quarantine %s: %s: %w", p.Test, checkTestResult(&check), store.ErrInvalid)
	case strings.TrimSpace(p.Owner) == "":
		return nil, false, fmt.Errorf("quarantine %s: an owner is required: who is to fix the test: %w", p.Test, store.ErrInvalid)
	case len(p.Owner) > store.MaxQuarantineText || len(p.Reason) > store.MaxQuarantineText || !utf8.ValidString(p.Owner) || strings.IndexByte(p.Owner, 0) >= 0:
		return nil, false, fmt.Errorf("quarantine %s: an owner or reason that is not text of at most %d bytes: %w", p.Test, store.MaxQuarantineText, store.ErrInvalid)
	case !p.ExpiresAt.After(now) || p.ExpiresAt.After(now.Add(store.MaxQuarantine)):
		return nil, false, fmt.Errorf("quarantine %s: it must end after now and within %d days: %w", p.Test, int(store.MaxQuarantine.Hours()/24), store.ErrInvalid)
	}
	var audit *store.AuditEntry
	if keep {
		var err error
		if audit, err = auditOf(ctx); err != nil {
			return nil, false, fmt.Errorf("quarantine %s: %w", p.Test, err)
		}
	}
	made := &store.Quarantine{Project: p.Project, Test: p.Test, Owner: p.Owner, Reason: p.Reason, CreatedBy: p.CreatedBy,
		CreatedAt: fromUS(us(now)), ExpiresAt: fromUS(us(p.ExpiresAt))}
	var (
		q     *store.Quarantine
		added bool
	)
	err := e.write(ctx, func(t *tx) error {
		q, added = made, false // an operation may run twice, the first run rolled back
		// The project's row is locked so that two puts at once can pass neither the
		// bound on quarantines nor, with keep, the check for one in force together.
		var pid uuid.UUID
		err := t.row(`SELECT id FROM projects WHERE name = ?`+e.d.ForUpdate, p.Project).Scan(&pid)
		if isNoRows(err) {
			return fmt.Errorf("project %q: %w", p.Project, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if keep {
			var (
				x                store.Quarantine
				created, expires int64
			)
			err := t.row(`SELECT `+quarantineCols+` FROM test_quarantine q
				WHERE q.project_id = ? AND q.suite = ? AND q.name = ? AND q.expires_at > ?`,
				pid, p.Test.Suite, p.Test.Name, us(now)).Scan(&x.Test.Suite, &x.Test.Name, &x.Owner, &x.Reason, &x.CreatedBy, &created, &expires)
			switch {
			case err == nil:
				x.Project, x.CreatedAt, x.ExpiresAt = p.Project, fromUS(created), fromUS(expires)
				q = &x
				return nil
			case !isNoRows(err):
				return err
			}
		}
		var others int
		if err := t.row(`SELECT COUNT(*) FROM test_quarantine WHERE project_id = ? AND expires_at > ? AND NOT (suite = ? AND name = ?)`,
			pid, us(now), p.Test.Suite, p.Test.Name).Scan(&others); err != nil {
			return err
		}
		if others >= store.MaxQuarantines {
			return fmt.Errorf("project %s has %d tests quarantined, the most it may: %w", p.Project, others, store.ErrConflict)
		}
		_, err = t.exec(`INSERT INTO test_quarantine (project_id, suite, name, owner, reason, created_by, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id, suite, name) DO UPDATE SET owner = excluded.owner, reason = excluded.reason,
				created_by = excluded.created_by, created_at = excluded.created_at, expires_at = excluded.expires_at`,
			pid, p.Test.Suite, p.Test.Name, p.Owner, p.Reason, p.CreatedBy, us(made.CreatedAt), us(made.ExpiresAt))
		if err != nil {
			return err
		}
		added = true
		return t.appendAudit(audit)
	})
	if err != nil {
		return nil, false, fmt.Errorf("quarantine %s: %w", p.Test, err)
	}
	return q, added, nil
}

// ListQuarantines implements store.Quarantines.
func (e *Engine) ListQuarantines(ctx context.Context, p store.ListQuarantinesParams) ([]*store.Quarantine, error) {
	pid, err := e.projectIDOf(ctx, p.Project)
	if err != nil {
		return nil, fmt.Errorf("list quarantines: %w", err)
	}
	at := p.At
	if at.IsZero() {
		at = e.clock.Now()
	}
	q := `SELECT ` + quarantineCols + ` FROM test_quarantine q WHERE q.project_id = ?`
	args := []any{pid}
	if !p.Expired {
		q += ` AND q.expires_at > ?`
		args = append(args, us(at))
	}
	rows, err := e.readRows(ctx, q+` ORDER BY q.suite, q.name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list quarantines: %w", err)
	}
	defer rows.Close()
	var out []*store.Quarantine
	for rows.Next() {
		var (
			x                store.Quarantine
			created, expires int64
		)
		if err := rows.Scan(&x.Test.Suite, &x.Test.Name, &x.Owner, &x.Reason, &x.CreatedBy, &created, &expires); err != nil {
			return nil, fmt.Errorf("list quarantines: %w", err)
		}
		x.Project, x.CreatedAt, x.ExpiresAt = p.Project, fromUS(created), fromUS(expires)
		out = append(out, &x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list quarantines: %w", err)
	}
	return out, nil
}

// DeleteQuarantine implements store.Quarantines.
func (e *Engine) DeleteQuarantine(ctx context.Context, project string, test testreport.TestID) error {
	now := us(e.clock.Now())
	err := e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE test_quarantine SET expires_at = ?
			WHERE project_id = (SELECT id FROM projects WHERE name = ?) AND suite = ? AND name = ? AND expires_at > ?`,
			now, project, test.Suite, test.Name, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%s is not quarantined in project %q: %w", test, project, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release %s from quarantine: %w", test, err)
	}
	return nil
}
