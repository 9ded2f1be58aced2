// Package store defines Gantry's durable state: the records of runs, jobs, steps,
// workers, artifacts, log chunks and outbound messages, and the operations on them, each
// one transaction with compare-and-swap semantics.
//
// It declares the contract only. Drivers (store/sqlite, store/postgres) implement it, and
// store/storetest is the conformance suite that defines it in executable form. No HTTP
// status codes or driver errors cross this boundary: callers test the errors below with
// errors.Is.
package store
