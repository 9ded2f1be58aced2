package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/testreport"
)

// Issue 33's targets: a job's 50,000 test results parsed and stored within reportTarget,
// and one test's history over 10,000 runs answered within historyTarget, on both stores.
const (
	reportTarget  = 5 * time.Second
	historyTarget = 50 * time.Millisecond
)

// testReportsScenario times what a job with a large JUnit report costs: the worker's
// parse of the file, then its results sent in the worker's batches under the job's
// lease until the coordinator has kept the last, and then the run's first page of tests
// as a reader asks for it.
func testReportsScenario() Scenario {
	const name = "test-reports"
	return Scenario{
		Name:   name,
		About:  "a job's JUnit report of 50,000 testcases (~30 MB, one in ten failing) parsed and stored through the agent API, then the run's tests read",
		Stores: []string{SQLite, Postgres},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				n := o.scaled(50_000)
				file := filepath.Join(c.dir, "report.xml")
				var rep junitReport
				err := r.setup(func() (err error) {
					rep, err = writeJUnit(file, n, 33)
					return err
				})
				if err != nil {
					return fmt.Errorf("write the JUnit report: %w", err)
				}
				r.Params["tests"], r.Params["report MiB"] = n, fmt.Sprintf("%.1f", float64(rep.bytes)/mib)
				r.Params["failing"], r.Params["skipped"] = rep.failing, rep.skipped
				r.countJobs(1, "its one job, whose report holds every test (the worker's part is played by the bench process: the parse, the sending, and the reads)")
				cl := c.client()
				const def = "name: bench-reports\njobs:\n  unit:\n    steps: [{run: \"true\"}]\n    reports:\n      junit: report.xml\n"
				run, l, err := leaseOne(ctx, cl, def, "bench-reports", "main")
				if err != nil {
					return err
				}
				pg, err := postgresMeter(ctx, store, c.db)
				if err != nil {
					return err
				}
				if store == Postgres && !pg.ok() {
					r.Notes = append(r.Notes, "the PostgreSQL server is not on this machine: coordinator and database CPU is the coordinator's alone")
				}

				// The worker's part: parse the file, as it does after the job's steps. The
				// report's writing leaves garbage the parse is not to collect.
				runtime.GC()
				self0, err := readUsage(os.Getpid())
				if err != nil {
					return err
				}
				began := time.Now()
				results, warnings, err := parseReportFile(file)
				parsed := time.Since(began)
				if err != nil {
					return err
				}
				self1, err := readUsage(os.Getpid())
				if err != nil {
					return err
				}
				if len(results) != n || len(warnings) > 0 {
					return fmt.Errorf("the report parsed to %d results (want %d) and %d warnings: %v", len(results), n, len(warnings), warnings)
				}

				// Then send them, each batch after the one before it is answered.
				coord0, err := readUsage(c.pid)
				if err != nil {
					return err
				}
				pg0, err := pg.cpu()
				if err != nil {
					return err
				}
				m, err := meter(c.pid)
				if err != nil {
					return err
				}
				began = time.Now()
				batches, err := sendTestResults(ctx, cl, l, results)
				sent := time.Since(began)
				if err != nil {
					return err
				}
				_, rss, err := m.end()
				if err != nil {
					return err
				}
				coord1, err := readUsage(c.pid)
				if err != nil {
					return err
				}
				pg1, err := pg.cpu()
				if err != nil {
					return err
				}
				self2, err := readUsage(os.Getpid())
				if err != nil {
					return err
				}
				r.Params["batches"] = batches
				if err := cl.post(ctx, "/api/v1/agent/jobs/"+l.job+"/complete", map[string]any{"token": l.token, "status": "failed",
					"exit_code": 1, "steps": []map[string]any{{"index": 0, "status": "running"}, {"index": 0, "status": "failed", "exit_code": 1}}}, nil); err != nil {
					return fmt.Errorf("complete job %s: %w", l.job, err)
				}

				// A reader's first page of the run's tests, failing first, each failing one
				// of them judged from the project's history.
				var reads []time.Duration
				for range 10 {
					var page struct {
						Total int `json:"total"`
						Tests []struct {
							Status string `json:"status"`
						} `json:"tests"`
					}
					began := time.Now()
					if err := cl.do(ctx, http.MethodGet, "/api/v1/runs/"+run+"/tests", "", nil, &page); err != nil {
						return fmt.Errorf("read the run's tests: %w", err)
					}
					reads = append(reads, time.Since(began))
					first := ""
					if len(page.Tests) > 0 {
						first = page.Tests[0].Status
					}
					if page.Total != n || len(page.Tests) != min(n, 200) || rep.failing > 0 && first != "failed" && first != "errored" {
						return fmt.Errorf("the run's tests: total %d (want %d), a page of %d, the first %q (want failing first)",
							page.Total, n, len(page.Tests), first)
					}
				}

				per := float64(n) / 1000
				coordCPU := (coord1.CPU - coord0.CPU).Seconds()
				// The same metrics on both stores, so that their tables line up: on SQLite
				// the database is the coordinator's own work.
				storeCPU := coordCPU + (pg1 - pg0).Seconds()
				r.add("coordinator and database CPU per 1,000 tests", storeCPU*1000/per, "ms", nil)
				r.add("coordinator CPU per 1,000 tests", coordCPU*1000/per, "ms", nil)
				r.add("worker CPU per 1,000 tests (parse)", (self1.CPU-self0.CPU).Seconds()*1000/per, "ms", nil)
				r.add("worker CPU per 1,000 tests (send)", (self2.CPU-self1.CPU).Seconds()*1000/per, "ms", nil)
				r.addMillis("parse", parsed, nil)
				r.addMillis("store", sent, nil)
				r.addMillis("parse and store", parsed+sent, atMost(float64(reportTarget.Milliseconds())))
				r.add("tests/s", float64(n)/(parsed+sent).Seconds(), "tests/s", nil)
				r.add("coordinator and database CPU over the store", storeCPU, "s", nil)
				r.add("coordinator CPU over the store", coordCPU, "s", nil)
				r.add("worker CPU over the parse", (self1.CPU - self0.CPU).Seconds(), "s", nil)
				r.add("coordinator peak RSS over the store", float64(rss)/mib, "MiB", nil)
				r.addLatency("run's tests, first page", reads, 0)
				r.Notes = append(r.Notes,
					"parse: testreport.Parse of the report file (in the page cache) in the bench process, as the worker reads it; "+
						"store: its results sent as the worker sends them, in batches of at most 1,000 results and 4 MiB of text, "+
						"each POST /api/v1/agent/jobs/{id}/tests under the job's lease after the one before it was answered, "+
						"until the last was acknowledged (nothing to mask: the job has no secrets)",
					"worker CPU: the bench process's, which plays the worker; coordinator CPU: the gantry server process's, "+
						"over the store; coordinator and database CPU: that and, on PostgreSQL, the server's backends "+
						"connected to the scenario's database (from /proc), without its background processes "+
						"(WAL writer, checkpointer, autovacuum)",
					"run's tests, first page: GET /api/v1/runs/{id}/tests (200 tests, failing first, the first 200 failing "+
						"judged from the project's history), 10 reads one after another once the job completed")
				return nil
			})
		},
	}
}

// junitReport is what writeJUnit wrote.
type junitReport struct {
	bytes                     int64
	failing, skipped, flakies int
}

// JUnit report vocabulary: enough names that the suites and tests look like a real
// project's, few enough that they repeat as a real project's do.
var (
	junitModules = []string{"billing", "auth", "orders", "inventory", "search", "notifications", "payments", "shipping", "reports", "accounts"}
	junitClasses = []string{"InvoiceService", "TokenValidator", "CheckoutFlow", "StockLedger", "QueryParser", "EmailRenderer",
		"CardGateway", "RateCalculator", "CsvExporter", "ProfileRepository", "SessionStore", "RetryPolicy"}
	junitVerbs = []string{"should", "rejects", "accepts", "computes", "renders", "persists", "retries", "rounds", "parses", "expires"}
	junitNouns = []string{"ExpiredToken", "EmptyCart", "HalfEvenTotals", "UnicodeNames", "NegativeStock", "LargeExport",
		"ConcurrentUpdates", "MissingField", "DuplicateOrder", "TimeoutAfterRetry", "ZeroQuantity", "ForeignCurrency"}
	junitFrames = []string{"org.junit.jupiter.api.AssertionUtils.fail(AssertionUtils.java:55)",
		"org.junit.jupiter.api.AssertEquals.failNotEqual(AssertEquals.java:197)",
		"org.junit.jupiter.api.AssertEquals.assertEquals(AssertEquals.java:182)",
		"org.junit.jupiter.api.Assertions.assertEquals(Assertions.java:1141)",
		"java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)",
		"java.base/java.lang.reflect.Method.invoke(Method.java:580)",
		"org.junit.platform.commons.util.ReflectionUtils.invokeMethod(ReflectionUtils.java:728)",
		"org.junit.jupiter.engine.execution.MethodInvocation.proceed(MethodInvocation.java:60)",
		"org.junit.jupiter.engine.execution.InvocationInterceptorChain$ValidatingInvocation.proceed(InvocationInterceptorChain.java:131)",
		"org.junit.jupiter.engine.extension.TimeoutExtension.intercept(TimeoutExtension.java:156)",
		"org.junit.jupiter.engine.descriptor.TestMethodTestDescriptor.invokeTestMethod(TestMethodTestDescriptor.java:218)",
		"org.junit.platform.engine.support.hierarchical.NodeTestTask.executeRecursively(NodeTestTask.java:151)",
		"org.apache.maven.surefire.junitplatform.JUnitPlatformProvider.invoke(JUnitPlatformProvider.java:184)"}
	junitLogs = []string{"INFO  [main] o.s.t.c.support.AbstractContextLoader - Loaded context for test class",
		"DEBUG [pool-3-thread-1] c.e.http.Client - POST /api/v2/orders -> 500 in 84 ms",
		"WARN  [main] c.e.retry.RetryPolicy - attempt 2 of 3 failed: connection reset by peer",
		"INFO  [main] c.e.db.Migrations - applied 14 migrations to the test schema",
		"ERROR [main] c.e.orders.CheckoutFlow - payment declined for order; rolling back reservation",
		"DEBUG [main] c.e.cache.LocalCache - miss for key customer:profile, loading from repository"}
)

// writeJUnit writes a JUnit XML report of n testcases to path, as Maven Surefire writes
// one: suites of 50 testcases, about one in ten failing (one failure in ten an error)
// with a message, a stack trace and some KiB of the test's log, one in fifty skipped, one
// in two hundred passing after a rerun. seed makes the same report every time.
func writeJUnit(path string, n int, seed uint64) (junitReport, error) {
	var rep junitReport
	f, err := os.Create(path)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const perSuite = 50
	type testcase struct {
		name   string
		kind   byte // 'p' passed, 'f' failed, 'e' errored, 's' skipped, 'r' passed after a rerun
		millis int
	}
	w.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(w, "<testsuites name=\"bench\" tests=\"%d\">\n", n)
	cases := make([]testcase, 0, perSuite)
	var line []byte
	for s := 0; s*perSuite < n; s++ {
		module, class := junitModules[s%len(junitModules)], junitClasses[(s/len(junitModules))%len(junitClasses)]
		suite := fmt.Sprintf("com.example.%s.%s%dTest", module, class, s)
		source := "src/test/java/" + strings.ReplaceAll(suite, ".", "/") + ".java"
		cases = cases[:0]
		var failures, errs, skipped, millis int
		for i := range min(perSuite, n-s*perSuite) {
			c := testcase{name: fmt.Sprintf("%s%s_%d", junitVerbs[rng.IntN(len(junitVerbs))], junitNouns[rng.IntN(len(junitNouns))], i),
				kind: 'p', millis: rng.IntN(40)}
			switch r := rng.IntN(1000); {
			case r < 90:
				c.kind, c.millis = 'f', 50+rng.IntN(2000)
				failures++
			case r < 100:
				c.kind, c.millis = 'e', 50+rng.IntN(2000)
				errs++
			case r < 120:
				c.kind = 's'
				skipped++
			case r < 125:
				c.kind = 'r'
			}
			millis += c.millis
			cases = append(cases, c)
		}
		fmt.Fprintf(w, "  <testsuite name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\" timestamp=\"2026-12-01T10:%02d:%02d\" hostname=\"ci-worker-3\">\n",
			suite, len(cases), failures, errs, skipped, float64(millis)/1000, s/60%60, s%60)
		for i, c := range cases {
			fmt.Fprintf(w, "    <testcase name=\"%s\" classname=\"%s\" time=\"%.3f\" file=\"%s\" line=\"%d\"", c.name, suite, float64(c.millis)/1000, source, 20+12*i)
			switch c.kind {
			case 'p':
				w.WriteString("/>\n")
				continue
			case 's':
				w.WriteString(">\n      <skipped message=\"disabled until the sandbox gateway is back (OPS-1182)\"/>\n    </testcase>\n")
				rep.skipped++
				continue
			case 'r':
				w.WriteString(">\n      <flakyFailure message=\"connection reset by peer\" type=\"java.net.SocketException\"/>\n    </testcase>\n")
				rep.flakies++
				continue
			}
			rep.failing++
			want, got := 200+rng.IntN(5)*100, 500+rng.IntN(4)
			msg := fmt.Sprintf("expected: &lt;%d&gt; but was: &lt;%d&gt;", want, got)
			elem, typ := "failure", "org.opentest4j.AssertionFailedError"
			if c.kind == 'e' {
				elem, typ, msg = "error", "java.lang.IllegalStateException", fmt.Sprintf("no route to payments-%d.internal:8443", got)
			}
			fmt.Fprintf(w, ">\n      <%s message=\"%s\" type=\"%s\">%s: %s\n", elem, msg, typ, typ, msg)
			fmt.Fprintf(w, "\tat %s.%s(%s.java:%d)\n", suite, c.name, suite[strings.LastIndexByte(suite, '.')+1:], 20+12*i+rng.IntN(10))
			for range 10 + rng.IntN(10) {
				fmt.Fprintf(w, "\tat %s\n", junitFrames[rng.IntN(len(junitFrames))])
			}
			fmt.Fprintf(w, "</%s>\n      <system-out><![CDATA[", elem)
			// Some KiB of the test's log: 10 to 29 lines.
			for k := range 10 + rng.IntN(20) {
				line = line[:0]
				line = fmt.Appendf(line, "2026-12-01 10:%02d:%02d.%03d %s (case %d, step %d)\n", s/60%60, s%60, k*17%1000,
					junitLogs[rng.IntN(len(junitLogs))], i, k)
				w.Write(line)
			}
			w.WriteString("]]></system-out>\n    </testcase>\n")
		}
		w.WriteString("  </testsuite>\n")
	}
	w.WriteString("</testsuites>\n")
	if err := w.Flush(); err != nil {
		return rep, err
	}
	st, err := f.Stat()
	if err != nil {
		return rep, err
	}
	rep.bytes = st.Size()
	return rep, f.Close()
}

// parseReportFile reads a JUnit report as the worker does.
func parseReportFile(path string) ([]testreport.Result, []testreport.Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	rs, ws, err := testreport.Parse(testreport.FormatJUnit, filepath.Base(path), f, testreport.MaxTestsPerJob)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return rs, ws, nil
}

// sendTestResults sends results under l's lease in the worker's batches, each after the
// one before it was answered, and returns how many batches it took. Every result must
// have been kept once.
func sendTestResults(ctx context.Context, cl *client, l lease, results []testreport.Result) (int, error) {
	batches, added, first := 0, 0, 0
	for _, batch := range testreport.Batches(results, nil) {
		var ans struct {
			Added int `json:"added"`
		}
		if err := cl.post(ctx, "/api/v1/agent/jobs/"+l.job+"/tests", map[string]any{"token": l.token, "first": first, "results": batch}, &ans); err != nil {
			return batches, fmt.Errorf("send test results %d to %d: %w", first, first+len(batch)-1, err)
		}
		batches++
		added += ans.Added
		first += len(batch)
	}
	if added != len(results) {
		return batches, fmt.Errorf("the coordinator kept %d of %d test results", added, len(results))
	}
	return batches, nil
}

// leaseOne submits a one-job run of def in project on branch and claims its job, started,
// as a worker does; it returns the run's id and the job's lease.
func leaseOne(ctx context.Context, cl *client, def, project, branch string) (string, lease, error) {
	var run submitted
	if err := cl.post(ctx, "/api/v1/runs", map[string]any{"pipeline": def, "project": project, "branch": branch}, &run); err != nil {
		return "", lease{}, fmt.Errorf("submit run: %w", err)
	}
	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	if err := cl.post(ctx, "/api/v1/agent/register", map[string]any{"name": "reports", "max_jobs": 1, "version": "bench"}, &reg); err != nil {
		return "", lease{}, fmt.Errorf("register a worker: %w", err)
	}
	var ans claimAnswer
	if err := cl.post(ctx, "/api/v1/agent/claim", map[string]any{"worker_id": reg.WorkerID, "max": 1, "wait": "10s", "start": true}, &ans); err != nil {
		return "", lease{}, fmt.Errorf("claim the run's job: %w", err)
	}
	if len(ans.Jobs) != 1 || ans.Jobs[0].RunID != run.ID {
		return "", lease{}, fmt.Errorf("claim the job of run %s: got %d jobs", run.ID, len(ans.Jobs))
	}
	return run.ID, lease{job: ans.Jobs[0].ID, token: ans.Jobs[0].Lease.Token}, nil
}

// The test whose history test-history reads, and the tests of each of its runs.
const (
	historySuite = "com.example.billing.InvoiceServiceTest"
	historyName  = "testRoundsHalfEven"
)

var historyTests = []struct {
	suite, name string
}{
	{historySuite, "testAddsTax"}, {historySuite, "testAppliesDiscount"}, {historySuite, "testRejectsNegativeLines"},
	{historySuite, "testCurrencyConversion"}, {historySuite, "testEmptyInvoice"}, {historySuite, historyName},
	{"com.example.auth.TokenValidatorTest", "testExpiredToken"}, {"com.example.auth.TokenValidatorTest", "testWrongAudience"},
	{"com.example.auth.TokenValidatorTest", "testClockSkew"}, {"com.example.auth.TokenValidatorTest", "testRevokedKey"},
	{"com.example.orders.CheckoutFlowIT", "testHappyPath"}, {"com.example.orders.CheckoutFlowIT", "testPaymentDeclined"},
	{"com.example.orders.CheckoutFlowIT", "testStockRaceTwoBuyers"}, {"com.example.orders.CheckoutFlowIT", "testAddressValidation"},
	{"com.example.orders.CheckoutFlowIT", "testGiftCardPartial"}, {"com.example.search.QueryParserTest", "testQuotedPhrase"},
	{"com.example.search.QueryParserTest", "testUnicodeFolding"}, {"com.example.search.QueryParserTest", "testEmptyQuery"},
	{"com.example.search.QueryParserTest", "testFieldPrefix"}, {"com.example.search.QueryParserTest", "testNestedGroups"},
}

// testHistoryScenario times one test's history in a project of 10,000 runs, each of
// whose jobs kept 20 test results. The runs, jobs and results are written by SQL straight
// into the coordinator's database, copies of one real run and job: 10,000 runs through
// the API would measure the API's intake, not the history's read.
func testHistoryScenario() Scenario {
	const name = "test-history"
	return Scenario{
		Name:   name,
		About:  "one test's history (limit 50; and on branch main) in a project of 10,000 runs of 20 tests each, 200 reads",
		Stores: []string{SQLite, Postgres},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				const project, limit = "bench-history", 50
				runs, reads := o.scaled(10_000), max(20, o.scaled(200))
				r.Params["runs"], r.Params["tests per run"], r.Params["result rows"] = runs, len(historyTests), runs*len(historyTests)
				r.Params["reads"], r.Params["limit"] = reads, limit
				// Reads, not jobs, are this scenario's work; the bench process reads, as a
				// client, and its one job is the template's.
				r.countUnits(float64(2*reads+max(10, reads/10)), "read", "the reads, of the history and of a run's tests")
				r.cpu.workers = noWorkers
				cl := c.client()
				// The template: a run of the project with one job, finished by a simulated
				// worker as any job is.
				stats := &simStats{}
				stop := startPool(ctx, c.base, "sim", 1, 1, nil, 0, nil, stats)
				var run submitted
				err := cl.post(ctx, "/api/v1/runs", map[string]any{"pipeline": "name: unit\njobs:\n  unit:\n    steps: [{run: \"true\"}]\n",
					"project": project, "branch": "main"}, &run)
				if err == nil {
					err = waitCount(ctx, &stats.completed, 1, stats, time.Minute, "the template job completed")
				}
				stop()
				if err != nil {
					return err
				}
				began := time.Now()
				newest, err := seedTestHistory(ctx, c, store, run.ID, runs)
				if err != nil {
					return fmt.Errorf("write the history of %d runs: %w", runs, err)
				}
				r.addMillis("time to write the history", time.Since(began), nil)
				pg, err := postgresMeter(ctx, store, c.db)
				if err != nil {
					return err
				}
				if store == Postgres && !pg.ok() {
					r.Notes = append(r.Notes, "the PostgreSQL server is not on this machine: coordinator and database CPU is the coordinator's alone")
				}
				test := url.QueryEscape(historySuite + "." + historyName)
				for _, v := range []struct {
					what, query string
					want        func(i int) bool // which seeded runs the answer holds
				}{
					{"history", "", func(int) bool { return true }},
					{"history on main", "&branch=main", func(i int) bool { return historyBranch(i) == "main" }},
				} {
					var wantRuns []int
					for i := runs - 1; i >= 0 && len(wantRuns) < limit; i-- {
						if v.want(i) {
							wantRuns = append(wantRuns, i+1)
						}
					}
					path := "/api/v1/projects/" + project + "/tests/history?test=" + test + "&limit=" + strconv.Itoa(limit) + v.query
					coord0, err := readUsage(c.pid)
					if err != nil {
						return err
					}
					pg0, err := pg.cpu()
					if err != nil {
						return err
					}
					var lat []time.Duration
					for range reads {
						var ans []struct {
							Run    int    `json:"run"`
							Name   string `json:"name"`
							Branch string `json:"branch"`
						}
						began := time.Now()
						if err := cl.do(ctx, http.MethodGet, path, "", nil, &ans); err != nil {
							return fmt.Errorf("read the %s: %w", v.what, err)
						}
						lat = append(lat, time.Since(began))
						got := make([]int, len(ans))
						for i, a := range ans {
							got[i] = a.Run
							if a.Name != historyName {
								got[i] = -1 // another test's result
							}
						}
						if !slices.Equal(got, wantRuns) {
							return fmt.Errorf("the %s: the results of runs %v, want %v", v.what, got, wantRuns)
						}
					}
					coord1, err := readUsage(c.pid)
					if err != nil {
						return err
					}
					pg1, err := pg.cpu()
					if err != nil {
						return err
					}
					coordCPU := coord1.CPU - coord0.CPU
					r.add(v.what+": coordinator and database CPU per read", float64((coordCPU+pg1-pg0).Microseconds())/1000/float64(reads), "ms", nil)
					r.add(v.what+": coordinator CPU per read", float64(coordCPU.Microseconds())/1000/float64(reads), "ms", nil)
					r.addLatency(v.what, lat, historyTarget)
				}
				// A run's own tests, the newest run's 20, read beside the project's history:
				// what that read costs grows with the table unless an index bounds it.
				var lat []time.Duration
				for range max(10, reads/10) {
					var page struct {
						Total int `json:"total"`
					}
					began := time.Now()
					if err := cl.do(ctx, http.MethodGet, "/api/v1/runs/"+newest.String()+"/tests", "", nil, &page); err != nil {
						return fmt.Errorf("read run %s's tests: %w", newest, err)
					}
					lat = append(lat, time.Since(began))
					if page.Total != len(historyTests) {
						return fmt.Errorf("run %s's tests: %d, want %d", newest, page.Total, len(historyTests))
					}
				}
				r.addLatency("a run's 20 tests", lat, 0)
				r.Notes = append(r.Notes,
					"history: GET /api/v1/projects/{name}/tests/history?test=SUITE.NAME&limit=50 (history on main: &branch=main), "+
						"read one after another by one client; the test is in every run, failing in one in seven; "+
						"six runs in ten are on main, the rest on three other branches; "+
						"a run's 20 tests: GET /api/v1/runs/{id}/tests of the newest run, one read after another; "+
						"coordinator and database CPU: the gantry server process's and, on PostgreSQL, the server's "+
						"backends connected to the scenario's database (from /proc), without its background processes",
					"the history is copies of one finished run and its job, with 20 results per job, inserted by SQL "+
						"while the coordinator runs (on PostgreSQL then vacuumed and analyzed, as autovacuum would soon: "+
						"else autovacuum's work lands among the reads)")
				return nil
			})
		},
	}
}

// historyBranch is the branch of seeded run i: six in ten on main.
func historyBranch(i int) string {
	switch i % 10 {
	case 6, 7:
		return "dev"
	case 8:
		return "feature/login-rework"
	case 9:
		return "release/1.4"
	}
	return "main"
}

// seedTestHistory writes runs copies of the finished run template (and its one job) as
// runs #1 to #runs of its project, one a minute up to now, each job with the 20 results
// of historyTests; the template becomes the project's run #runs+1. It returns the id of
// the newest copy.
func seedTestHistory(ctx context.Context, c *coordinator, store, template string, runs int) (uuid.UUID, error) {
	var (
		db     *sql.DB
		err    error
		idType = "TEXT"
	)
	switch store {
	case SQLite:
		db, err = sql.Open("sqlite", "file:"+filepath.Join(c.dir, "gantry.db")+"?_pragma=busy_timeout(30000)")
	case Postgres:
		db, err = sql.Open("pgx", c.db)
		idType = "UUID"
	default:
		return uuid.Nil, fmt.Errorf("unknown store %q", store)
	}
	if err != nil {
		return uuid.Nil, err
	}
	defer db.Close()
	// Temporary tables live in one session: keep to one connection.
	conn, err := db.Conn(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	defer conn.Close()
	exec := func(q string, args ...any) error {
		if store == Postgres {
			q = numberPlaceholders(q)
		}
		_, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("%.80s: %w", strings.Join(strings.Fields(q), " "), err)
		}
		return nil
	}
	var (
		projectID, job string
		attempt        int
		created        int64
	)
	q := `SELECT r.project_id, j.id, j.attempt, r.created_at FROM runs r JOIN jobs j ON j.run_id = r.id WHERE r.id = ? AND j.status = 'success'`
	if store == Postgres {
		q = numberPlaceholders(q)
	}
	if err := conn.QueryRowContext(ctx, q, template).Scan(&projectID, &job, &attempt, &created); err != nil {
		return uuid.Nil, fmt.Errorf("read the template run %s: %w", template, err)
	}

	// One row per run to write, with what sets it apart.
	if err := exec(`CREATE TEMP TABLE seed_runs (i INTEGER NOT NULL, run_id ` + idType + ` NOT NULL, job_id ` + idType + ` NOT NULL,
		number INTEGER NOT NULL, branch TEXT NOT NULL, sha TEXT NOT NULL, ref TEXT NOT NULL, trigger TEXT NOT NULL,
		created_at BIGINT NOT NULL)`); err != nil {
		return uuid.Nil, err
	}
	const minute = int64(time.Minute / time.Microsecond)
	var newest uuid.UUID
	for lo := 0; lo < runs; lo += 500 {
		hi := min(runs, lo+500)
		var (
			b    strings.Builder
			args []any
		)
		b.WriteString(`INSERT INTO seed_runs (i, run_id, job_id, number, branch, sha, ref, trigger, created_at) VALUES `)
		for i := lo; i < hi; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			branch := historyBranch(i)
			sha := fmt.Sprintf("%040x", uint64(i)*0x9e3779b97f4a7c15)
			trigger := fmt.Sprintf(`{"ref":"refs/heads/%s","branch":"%s","sha":"%s","event":"push","verified":"webhook"}`, branch, branch, sha)
			newest = uuid.Must(uuid.NewV7())
			args = append(args, i, newest, uuid.Must(uuid.NewV7()), i+1, branch, sha, "refs/heads/"+branch, trigger,
				created-int64(runs-i)*minute)
		}
		if err := exec(b.String(), args...); err != nil {
			return uuid.Nil, err
		}
	}
	if err := exec(`CREATE TEMP TABLE seed_tests (idx INTEGER NOT NULL, suite TEXT NOT NULL, name TEXT NOT NULL, file TEXT NOT NULL,
		line INTEGER NOT NULL)`); err != nil {
		return uuid.Nil, err
	}
	for k, t := range historyTests {
		file := "src/test/java/" + strings.ReplaceAll(t.suite, ".", "/") + ".java"
		if err := exec(`INSERT INTO seed_tests (idx, suite, name, file, line) VALUES (?, ?, ?, ?, ?)`, k, t.suite, t.name, file, 30+12*k); err != nil {
			return uuid.Nil, err
		}
	}
	// The template's number goes last, so that the copies take #1 to #runs in the order
	// they were made.
	if err := exec(`UPDATE runs SET number = ? WHERE id = ?`, runs+1, template); err != nil {
		return uuid.Nil, err
	}
	if err := exec(`UPDATE run_numbers SET last = ? WHERE project_id = ?`, runs+1, projectID); err != nil {
		return uuid.Nil, err
	}

	const jobMinutes = 3 // how long each copied job ran
	copies := []struct {
		table, key, template string
		set                  map[string]string
	}{
		{"runs", "id", template, map[string]string{"id": "s.run_id", "number": "s.number", "branch": "s.branch", "ref": "s.ref",
			"trigger": "s.trigger", "event": "'push'", "idempotency_key": "NULL", "created_at": "s.created_at",
			"started_at": "s.created_at", "finished_at": fmt.Sprintf("s.created_at + %d", jobMinutes*minute)}},
		{"jobs", "id", job, map[string]string{"id": "s.job_id", "run_id": "s.run_id", "created_at": "s.created_at",
			"queued_at": "s.created_at", "started_at": "s.created_at", "finished_at": fmt.Sprintf("s.created_at + %d", jobMinutes*minute)}},
		{"job_specs", "job_id", job, map[string]string{"job_id": "s.job_id"}},
	}
	// Each statement writes at most 50,000 rows: the coordinator's writer is never held
	// up for long.
	step := max(1, 50_000/len(historyTests))
	for lo := 0; lo < runs; lo += step {
		hi := min(runs, lo+step)
		for _, cp := range copies {
			cols, err := tableColumns(ctx, conn, cp.table)
			if err != nil {
				return uuid.Nil, err
			}
			sel := make([]string, len(cols))
			for k, col := range cols {
				sel[k] = `t."` + col + `"`
				if e, ok := cp.set[col]; ok {
					sel[k] = e
				}
				cols[k] = `"` + col + `"`
			}
			if err := exec(`INSERT INTO `+cp.table+` (`+strings.Join(cols, ", ")+`) SELECT `+strings.Join(sel, ", ")+
				` FROM `+cp.table+` t, seed_runs s WHERE t.`+cp.key+` = ? AND s.i >= ? AND s.i < ?`, cp.template, lo, hi); err != nil {
				return uuid.Nil, err
			}
		}
		// The test of interest fails in one run in seven, every other test in about one
		// run in a hundred; one is skipped in every run, and one passes after a rerun
		// now and then. A failure keeps a message and some output, as a passed test does
		// not.
		fails := fmt.Sprintf(`(k.name = '%s' AND s.i %% 7 = 3) OR (k.name <> '%s' AND (s.i * 31 + k.idx * 17) %% 97 = 0)`, historyName, historyName)
		output := strings.Repeat("2026-12-01 10:00:00.000 INFO  [main] c.e.billing.InvoiceService - rounding 0.125 to 2 places\n", 16)
		if err := exec(`INSERT INTO test_results (`+testResultColumns+`)
			SELECT s.job_id, `+strconv.Itoa(attempt)+`, k.idx, s.run_id, CAST(? AS `+idType+`), s.branch, s.sha, k.suite, k.name, k.file, k.line,
				CASE WHEN `+fails+` THEN (CASE WHEN s.i % 50 = 0 THEN 'errored' ELSE 'failed' END)
					WHEN k.idx = 19 THEN 'skipped' ELSE 'passed' END,
				(s.i * 7919 + k.idx * 104729) % 2000000,
				CASE WHEN k.idx = 11 AND s.i % 25 = 0 THEN 1 ELSE 0 END,
				CASE WHEN `+fails+` THEN ? WHEN k.idx = 19 THEN 'needs the sandbox gateway' ELSE '' END,
				CASE WHEN `+fails+` THEN ? ELSE '' END,
				s.created_at + `+strconv.FormatInt(jobMinutes*minute, 10)+`
			FROM seed_runs s, seed_tests k WHERE s.i >= ? AND s.i < ?`,
			projectID, "expected: <12.13> but was: <12.12>", output, lo, hi); err != nil {
			return uuid.Nil, err
		}
	}
	var n int
	q = `SELECT COUNT(*) FROM test_results WHERE project_id = ?`
	if store == Postgres {
		q = numberPlaceholders(q)
	}
	if err := conn.QueryRowContext(ctx, q, projectID).Scan(&n); err != nil {
		return uuid.Nil, err
	}
	if n != runs*len(historyTests) {
		return uuid.Nil, fmt.Errorf("the project holds %d test results, want %d", n, runs*len(historyTests))
	}
	if store == Postgres {
		// Plans should see the tables as they now are, and autovacuum find nothing to do
		// among the reads, as it would soon make them.
		for _, t := range []string{"runs", "jobs", "job_specs", "test_results"} {
			if err := exec(`VACUUM ANALYZE ` + t); err != nil {
				return uuid.Nil, err
			}
		}
	}
	return newest, nil
}

// testResultColumns are the columns of test_results seedTestHistory writes, in its order.
const testResultColumns = `job_id, attempt, idx, run_id, project_id, branch, sha, suite, name, file, line, status,
	duration_us, failed_attempts, message, output, created_at`

// tableColumns lists a table's columns in their order.
func tableColumns(ctx context.Context, conn *sql.Conn, table string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, `SELECT * FROM `+table+` WHERE 1 = 0`)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	return rows.Columns()
}

// numberPlaceholders turns ? placeholders into PostgreSQL's $1, $2, ... (the bench's
// statements hold no ? in their text).
func numberPlaceholders(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
