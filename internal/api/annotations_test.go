package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/logs"
)

type annotationView struct {
	JobID     string `json:"job_id"`
	Job       string `json:"job"`
	Attempt   int    `json:"attempt"`
	Seq       int64  `json:"seq"`
	Step      *int   `json:"step"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Title     string `json:"title"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	Col       int    `json:"col"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	CreatedAt string `json:"created_at"`
}

// TestAnnotationsFromLogs: the annotated lines of a log batch become the job's
// annotations, once however often the batch is sent; the job and its run list them, and
// the log keeps the lines with their level and fold marks.
func TestAnnotationsFromLogs(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, _ *blob.DirStore) {
		id, token := b.leasedJob(t)
		lines := []logs.Line{
			{Seq: 1, TS: 1, Stream: logs.Stdout, Text: "Build", Group: logs.GroupStart},
			{Seq: 2, TS: 2, Stream: logs.Stdout, Text: "unused x", Level: logs.LevelError,
				Annotation: &logs.Annotation{Step: 0, Title: "Vet", File: "a.go", Line: 3, Col: 4, EndLine: 5, EndColumn: 6}},
			{Seq: 3, TS: 3, Stream: logs.Stdout, Group: logs.GroupEnd},
			{Seq: 4, TS: 4, Stream: logs.Stderr, Text: "careful", Level: logs.LevelWarning, Annotation: &logs.Annotation{Step: -1}},
			{Seq: 5, TS: 5, Stream: logs.Stdout, Text: "detail", Level: logs.LevelDebug},
		}
		body, _ := json.Marshal(map[string]any{"token": token, "lines": lines})
		for range 2 { // the second is a re-send
			if next := b.appendLogs(t, id, string(body)); next != 6 {
				t.Fatalf("next_seq %d, want 6", next)
			}
		}
		var got []annotationView
		r := b.get(t, "/api/v1/jobs/"+id+"/annotations")
		if r.status != http.StatusOK {
			t.Fatalf("GET job annotations: %d %s", r.status, r.body)
		}
		r.decode(t, &got)
		if len(got) != 2 {
			t.Fatalf("job annotations %s, want 2", r.body)
		}
		e, w := got[0], got[1]
		if e.JobID != id || e.Attempt != 1 || e.Seq != 2 || e.Step == nil || *e.Step != 0 || e.Level != "error" ||
			e.Message != "unused x" || e.Title != "Vet" || e.File != "a.go" || e.Line != 3 || e.Col != 4 ||
			e.EndLine != 5 || e.EndColumn != 6 || e.CreatedAt == "" {
			t.Errorf("error annotation %+v", e)
		}
		if w.Seq != 4 || w.Step != nil || w.Level != "warning" || w.Message != "careful" || w.File != "" {
			t.Errorf("warning annotation %+v", w)
		}

		var job jobView
		b.get(t, "/api/v1/jobs/"+id).decode(t, &job)
		r = b.get(t, "/api/v1/runs/"+job.RunID+"/annotations")
		if r.status != http.StatusOK {
			t.Fatalf("GET run annotations: %d %s", r.status, r.body)
		}
		got = nil
		r.decode(t, &got)
		if len(got) != 2 || got[0].Job != "a" || got[0].JobID != id {
			t.Errorf("run annotations %s", r.body)
		}

		stored := b.readLines(t, "/api/v1/jobs/"+id+"/logs")
		if len(stored) != 5 || stored[0].Group != logs.GroupStart || stored[2].Group != logs.GroupEnd ||
			stored[1].Level != logs.LevelError || stored[1].Annotation == nil || stored[1].Annotation.File != "a.go" ||
			stored[4].Level != logs.LevelDebug {
			t.Errorf("stored lines %+v", stored)
		}

		if r := b.get(t, "/api/v1/jobs/"+id+"/annotations?attempt=2"); r.status != http.StatusOK || string(r.body) != "[]\n" && string(r.body) != "[]" {
			t.Errorf("another attempt: %d %s, want 200 []", r.status, r.body)
		}
		if r := b.get(t, "/api/v1/jobs/"+id+"/annotations?attempt=0"); r.status != http.StatusBadRequest {
			t.Errorf("attempt=0: %d, want 400", r.status)
		}
		if r := b.get(t, "/api/v1/jobs/0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b/annotations"); r.status != http.StatusNotFound {
			t.Errorf("unknown job: %d, want 404", r.status)
		}
	})
}
