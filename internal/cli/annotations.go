package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// annotationView is an annotation as the API lists it (GET /api/v1/runs/{id}/annotations).
type annotationView struct {
	JobID   string `json:"job_id"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Seq     int64  `json:"seq"`
	Step    *int   `json:"step"`
	Level   string `json:"level"`
	Message string `json:"message"`
	Title   string `json:"title"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
}

// getAnnotations reads the annotations of a run's jobs; none from a coordinator too old
// to keep them (a 404: the caller has just read the run).
func getAnnotations(ctx context.Context, c *apiClient, runID string) ([]annotationView, error) {
	var out []annotationView
	err := c.getJSON(ctx, "/api/v1/runs/"+runID+"/annotations", &out)
	var se *serverError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get the annotations of run %s: %w", runID, err)
	}
	return out, nil
}

// printAnnotations prints a run's annotations, one a line, in width columns:
// "job  error  file:line:col  title: message" (a message's first line only).
func printAnnotations(w io.Writer, as []annotationView, width int) {
	if len(as) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("annotations\n")
	for _, a := range as {
		where := a.File
		if where != "" && a.Line > 0 {
			where += ":" + strconv.Itoa(a.Line)
			if a.Col > 0 {
				where += ":" + strconv.Itoa(a.Col)
			}
		}
		msg, _, _ := strings.Cut(a.Message, "\n")
		if a.Title != "" {
			msg = a.Title + ": " + msg
		}
		parts := []string{"  " + a.Job, a.Level}
		if where != "" {
			parts = append(parts, where)
		}
		parts = append(parts, msg)
		b.WriteString(elide(strings.Join(parts, "  "), max(width, 40)))
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}
