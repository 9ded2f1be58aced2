// Package sqlstore implements store.Store once, in SQL that both SQLite and PostgreSQL
// run, so the two drivers share every state transition, DAG rule and retry decision.
//
// Drivers supply a Dialect (placeholders, row locking, wake-ups) and the migrated
// *sql.DB handles; this package must not know which database it is talking to beyond
// what the Dialect says.
package sqlstore
