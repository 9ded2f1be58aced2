//go:build race

package web_test

// raceDetector says the tests run under -race, which slows the coordinator in the test
// process several times over: timings are then logged, not held to a bound.
const raceDetector = true
