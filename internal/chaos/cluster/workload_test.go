package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strings"
)

// jobWant is what one job definition of a generated run must leave behind.
type jobWant struct {
	logLines  int  // lines "L<n> <job id>" its work step prints, n = 1..logLines
	container bool // runs in a container of Gantry's image on a docker worker
	// artifact is the content of the file out/data.txt it keeps; nil for none.
	artifact []byte
}

// runSpec is one generated run: its pipeline and what each job of it must do.
type runSpec struct {
	index int
	key   string // the submission's Idempotency-Key
	yaml  []byte
	want  map[string]jobWant // by job definition name
	jobs  int                // jobs after the matrices are expanded
}

// generate makes run i of a seed's workload: the same seed and index give the same run.
// Each run is a DAG that mixes what a real pipeline does: a once step in every job (DESIGN
// §5.7), work that writes marks to the ledger while it runs, an artifact handed to the
// jobs that need it and checked by them, a matrix, a job in a container on a docker
// worker, one that fails its first attempt and is retried, a cache shared with other
// runs, a long log, and work that outlasts a lease. Every job retries lost attempts, so
// no fault may fail a run.
//
// ledgerURL is where the container jobs send their marks; the shell jobs append theirs
// to /ledger/marks on their worker, which the suite reads.
func generate(seed uint64, i int, ledgerURL string) runSpec {
	rng := mrand.New(mrand.NewPCG(seed, uint64(i)+1))
	tag := fmt.Sprintf("cl-%d-%d", seed, i)
	dataLines := 500 + rng.IntN(4000)
	data := artifactContent(tag, dataLines)
	sum := sha256.Sum256(data)
	cacheKey := fmt.Sprintf("cl-%d-%d", seed, i%3)
	spec := runSpec{index: i, key: fmt.Sprintf("cluster-%d-%d", seed, i), want: map[string]jobWant{}}
	ticks := func() int { return 5 + rng.IntN(11) } // 1-3 s of work at a mark every 0.2 s

	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", tag)
	fmt.Fprintf(&b, "defaults:\n  timeout: 5m\n  retry: {max_attempts: 30, backoff: 1s, on: [lost]}\n")
	fmt.Fprintf(&b, "  env: {LEDGER_URL: %q, DATA_TAG: %q, DATA_SHA: %q, DATA_LINES: \"%d\", CACHE_VAL: %q}\n",
		ledgerURL, tag, hex.EncodeToString(sum[:]), dataLines, "v-"+cacheKey)
	b.WriteString("jobs:\n")
	job := func(name string, w jobWant, extra, after string, nticks int) {
		spec.want[name] = w
		fmt.Fprintf(&b, "  %s:\n%s", name, extra)
		led := ledShell
		if w.container {
			led = ledHTTP
		} else {
			b.WriteString("    runs_on: [shell]\n")
		}
		steps := []string{
			fmt.Sprintf("      - {name: once, once: true, run: %s}\n", yamlQuote(led+"led once")),
			fmt.Sprintf("      - {name: work, run: %s}\n", yamlQuote(led+workScript(w.logLines, nticks))),
		}
		if after != "" {
			steps = append(steps, fmt.Sprintf("      - {name: after, run: %s}\n", yamlQuote(after)))
		}
		b.WriteString("    steps:\n" + strings.Join(steps, ""))
	}
	job("prep", jobWant{logLines: 20, artifact: data},
		"    artifacts: {paths: [out/data.txt]}\n",
		`mkdir -p out && seq 1 "$DATA_LINES" | sed "s/^/$DATA_TAG /" > out/data.txt`, ticks())
	job("build", jobWant{logLines: 20},
		"    needs: [prep]\n    matrix: {n: [1, 2]}\n", checkArtifact, ticks())
	// A container job and a shell job of each run work 8-16 s, past a lease and its reap
	// grace, so that one a fault cuts off is still running when its job can be given to
	// another worker: its fence is what keeps the two attempts apart. The container job
	// also keeps the docker workers, which take no other jobs, busy enough that a fault
	// on one mostly cuts a container short.
	job("box", jobWant{logLines: 50, container: true},
		"    needs: [prep]\n    image: "+gantryImage+"\n    container: {pull: never}\n", checkArtifact, 40+rng.IntN(41))
	job("long", jobWant{logLines: 30}, "", "", 40+rng.IntN(41))
	job("flaky", jobWant{logLines: 10},
		"    retry: {max_attempts: 30, backoff: 1s, on: [failure, lost]}\n",
		`[ "$GANTRY_ATTEMPT" -gt 1 ] || { echo "fails its first attempt on purpose"; exit 3; }`, ticks())
	job("cached", jobWant{logLines: 10},
		fmt.Sprintf("    cache: [{key: %q, paths: [cachedir]}]\n", cacheKey),
		`if [ -f cachedir/v ]; then read -r v < cachedir/v; [ "$v" = "$CACHE_VAL" ] || { echo "cache holds $v, want $CACHE_VAL"; exit 8; }; else mkdir -p cachedir && echo "$CACHE_VAL" > cachedir/v; fi`,
		ticks())
	job("logs", jobWant{logLines: 3000 + rng.IntN(3000)}, "", "", ticks())
	job("final", jobWant{logLines: 5}, "    needs: [build, box, flaky, cached, logs, long]\n", "", ticks())
	spec.yaml = []byte(b.String())
	spec.jobs = len(spec.want) + 1 // build is a matrix of two
	return spec
}

// artifactContent is what prep keeps in out/data.txt: "TAG n" for n = 1..lines.
func artifactContent(tag string, lines int) []byte {
	var b strings.Builder
	for n := 1; n <= lines; n++ {
		fmt.Fprintf(&b, "%s %d\n", tag, n)
	}
	return []byte(b.String())
}

// The step preludes: led KIND writes a mark, "KIND JOB ATTEMPT WHERE UPTIME", where WHERE
// is the host name of what runs the step (a shell worker's container, or the job's
// container) and UPTIME the boot clock. Neither forks but to send it over HTTP.
const (
	ledShell = `read -r W < /etc/hostname
led() { read -r up _ < /proc/uptime; echo "$1 $GANTRY_JOB_ID $GANTRY_ATTEMPT $W $up" >> /ledger/marks; }
`
	ledHTTP = `read -r W < /etc/hostname
led() { read -r up _ < /proc/uptime; n=0; until wget -q -O /dev/null "$LEDGER_URL/$1/$GANTRY_JOB_ID/$GANTRY_ATTEMPT/$W/$up"; do n=$((n+1)); [ $n -lt 50 ] || return 1; sleep 0.1; done; }
`
	// checkArtifact fails a job whose copy of prep's artifact is not what prep kept.
	checkArtifact = `echo "$DATA_SHA  out/data.txt" | sha256sum -c - || { echo "the artifact differs from what prep kept"; exit 7; }`
)

// workScript prints the job's numbered lines and writes a mark every 0.2 s for ticks
// marks, between a start and an end mark.
func workScript(lines, ticks int) string {
	return fmt.Sprintf(`led start
i=1; while [ $i -le %d ]; do echo "L$i $GANTRY_JOB_ID"; i=$((i+1)); done
t=0; while [ $t -lt %d ]; do led tick; sleep 0.2; t=$((t+1)); done
led end`, lines, ticks)
}

// yamlQuote writes s as a YAML double-quoted scalar.
func yamlQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
