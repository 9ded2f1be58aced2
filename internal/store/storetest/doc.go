// Package storetest is the conformance suite of the store contract: every driver's test
// file calls Run with a Harness, and CrashChild from its TestMain.
//
// A behaviour this suite does not check is not part of the contract. It must not be
// imported by non-test code, and it tests only through the store.Store interface: no SQL,
// no driver internals.
package storetest
