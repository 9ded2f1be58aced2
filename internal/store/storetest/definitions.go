package storetest

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// DefinitionsMoved checks a store migrated from a database whose runs kept their
// definitions in their own rows (before migration 0043): each run of ids, by name, has
// the definition defs names for it (nil for none) and reads as it was written (named
// by its key in ids, env A=1); a run created afterwards keeps its definition too.
func DefinitionsMoved(t *testing.T, st store.Store, ids map[string]uuid.UUID, defs map[string][]byte) {
	t.Helper()
	ctx := t.Context()
	for name, id := range ids {
		def, err := st.RunDefinition(ctx, id)
		if err != nil || !bytes.Equal(def, defs[name]) {
			t.Errorf("run %q: RunDefinition = %q, %v; want %q", name, def, err, defs[name])
		}
		run, err := st.GetRun(ctx, id)
		if err != nil || run.Name != name || run.Env["A"] != "1" {
			t.Errorf("run %q: GetRun = %+v, %v; want it as written", name, run, err)
		}
	}
	if _, err := st.RunDefinition(ctx, store.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunDefinition of no run = %v; want ErrNotFound", err)
	}
	yaml := []byte("jobs: { a: { steps: [ { run: 'true' } ] } }")
	plan, err := pipeline.Compile(yaml, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := st.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: plan, Definition: yaml})
	if err != nil {
		t.Fatalf("CreateRun after the migration: %v", err)
	}
	if def, err := st.RunDefinition(ctx, run.ID); err != nil || !bytes.Equal(def, yaml) {
		t.Errorf("a new run's RunDefinition = %q, %v; want its definition", def, err)
	}
}

// MigrationsBefore is the migrations of sub numbered below first: what a database made
// before first was added had applied.
func MigrationsBefore(t *testing.T, sub fs.FS, first string) fstest.MapFS {
	t.Helper()
	before := fstest.MapFS{}
	names, err := fs.Glob(sub, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name >= first {
			continue
		}
		body, err := fs.ReadFile(sub, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = &fstest.MapFile{Data: body}
	}
	return before
}
