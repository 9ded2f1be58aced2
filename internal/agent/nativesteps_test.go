package agent

import (
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

// nativeFirst runs actions/cache and actions/upload-artifact as steps at their place: a
// cache with an id (its outputs read), a key the worker computes with hashFiles, saved
// by its post when the job's steps succeed; a restore of an absent key; uploads under
// if:, with ! exclusions and hidden files left out, and one that finds nothing; the
// next job downloads the set by name, into a path, by pattern (each set in a directory
// of its name, or merged), and fails to download a name no job kept.
const nativeFirst = `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - run: mkdir -p out && echo built > out/a.txt && echo hidden > out/.h && echo skip > out/b.log
      - id: c
        uses: actions/cache@v4
        with:
          path: out2
          key: k-${{ hashFiles('out/a.txt') }}
      - run: |
          test -z "${{ steps.c.outputs.cache-hit }}"
          test "${{ steps.c.outputs.cache-primary-key }}" = "k-HASH"
          mkdir -p out2 && echo cached > out2/f
      - id: r
        uses: actions/cache/restore@v4
        with: {path: x, key: absent}
      - if: steps.r.outputs.cache-hit == '' && steps.r.outputs.cache-primary-key == 'absent'
        uses: actions/upload-artifact@v4
        with:
          name: first
          path: |
            out/
            !out/*.log
      - uses: actions/upload-artifact@v4
        with: {name: second, path: missing/, if-no-files-found: ignore}
      - if: github.event_name == 'schedule'
        uses: actions/upload-artifact@v4
        with: {name: never, path: out2}
  after:
    needs: t
    runs-on: ubuntu-latest
    steps:
      - run: test ! -e out && test ! -e a.txt
      - id: d
        uses: actions/download-artifact@v4
        with: {name: first}
      - uses: actions/download-artifact@v4
        with: {name: first, path: got}
      - uses: actions/download-artifact@v4
        with: {pattern: 'f*', path: all}
      - uses: actions/download-artifact@v4
        with: {pattern: 'f*', path: merged, merge-multiple: true}
      - id: home
        continue-on-error: true
        uses: actions/download-artifact@v4
        with: {name: first, path: ~/dl}
      - id: none
        continue-on-error: true
        uses: actions/download-artifact@v4
        with: {name: "${{ format('no{0}', 'pe') }}"}
      - run: |
          test "$(cat a.txt)" = built && test "$(cat got/a.txt)" = built
          test "$(cat all/first/a.txt)" = built && test "$(cat merged/a.txt)" = built
          test ! -e b.log && test ! -e .h && test ! -e out
          test "${{ steps.d.outputs.download-path }}" = "$GITHUB_WORKSPACE"
          test "${{ steps.none.outcome }}" = failure && test "${{ steps.home.outcome }}" = failure && test ! -e '~'
`

// nativeSecond reads what nativeFirst saved: the exact key restored (cache-hit true, and
// no save by its post); a cache saved at once by actions/cache/save; fail-on-cache-miss
// failing its step; an upload under if: failure() after a failed step.
const nativeSecond = `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - run: mkdir -p out && echo built > out/a.txt
      - id: c
        uses: actions/cache@v4
        with:
          path: out2
          key: k-${{ hashFiles('out/a.txt') }}
      - run: |
          test "${{ steps.c.outputs.cache-hit }}" = true
          test "${{ steps.c.outputs.cache-matched-key }}" = "k-HASH"
          test "$(cat out2/f)" = cached
          echo report > report.txt
      - uses: actions/cache/save@v4
        with: {path: out2, key: saved-now}
      - id: miss
        continue-on-error: true
        uses: actions/cache/restore@v4
        with: {path: out2, key: absent, fail-on-cache-miss: true}
      - run: test "${{ steps.miss.outcome }}" = failure && exit 3
      - if: failure()
        uses: actions/upload-artifact@v4
        with: {name: reports, path: report.txt, retention-days: 2}
`

func TestNativeSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	main := store.Trigger{Branch: "main", Event: "push", Repository: "acme/app", Verified: store.RefFromWebhook}
	hash := githubHash("built\n")

	run := b.submitTriggered(t, strings.ReplaceAll(nativeFirst, "HASH", hash), main)
	b.wantSuccess(t, run)
	log := b.jobLog(t, run, "t")
	wantLog(t, log, "cache k-"+hash+": miss", "cache absent: miss", "step Post ", "cache k-"+hash+": saved in scope main",
		"actions/upload-artifact: artifact first: 1 file of out")
	wantLog(t, b.jobLog(t, run, "after"), "actions/download-artifact: artifact first of job t: 1 file into the workspace",
		"into all/first", "no job of this run kept an artifact named nope", `path "~/dl" is under the home directory`)
	if strings.Contains(log, "no artifact second") || strings.Contains(log, "artifact never") {
		t.Errorf("an upload that finds nothing with if-no-files-found: ignore says nothing, and a false if: skips one:\n%s", log)
	}
	as := b.runArtifacts(t, run)
	if _, ok := as["t:out/a.txt"]; !ok || len(as) != 1 {
		t.Errorf("artifacts %v, want t:out/a.txt only (no .log, no hidden file, nothing of out2)", as)
	}
	if c := b.caches(t)["main/k-"+hash]; c == nil {
		t.Fatalf("the cache step's post saved nothing: %v", b.caches(t))
	}

	run = b.submitTriggered(t, strings.ReplaceAll(nativeSecond, "HASH", hash), main)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	log = b.jobLog(t, run, "t")
	wantLog(t, log, "hit (exact key)", "cache saved-now: saved in scope main",
		"actions/cache/restore: no cache entry of the key absent; failing, as fail-on-cache-miss asks", "artifact reports: 1 file")
	if strings.Contains(log, "step Post ") || !strings.Contains(log, "skipped, post-if: success() was false") {
		t.Errorf("a failed job's cache step has no post to run (post-if success()):\n%s", log)
	}
	if _, ok := b.runArtifacts(t, run)["t:report.txt"]; !ok {
		t.Errorf("the if: failure() upload kept nothing: %v", b.runArtifacts(t, run))
	}
	if b.caches(t)["main/saved-now"] == nil {
		t.Errorf("actions/cache/save saved nothing")
	}
}
