// Package testdb gives each test its own PostgreSQL database, on the server named by
// GANTRY_TEST_POSTGRES_URL or on a throwaway cluster started once per test process.
//
// It must not be imported by non-test code.
package testdb
