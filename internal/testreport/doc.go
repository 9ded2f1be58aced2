// Package testreport reads the test reports a job's steps leave (JUnit XML, go test
// -json, TAP) into compact per-test results, and decides from the results of many
// attempts which failures are new, known broken or flaky, each verdict with its evidence.
// It does no I/O beyond the reader it is given and keeps nothing: the worker parses, the
// store keeps, and the verdicts are pure functions of what the store hands them.
package testreport
