// Package web owns Gantry's dashboard: the single-page app embedded in the binary and the
// handler that serves it. It talks to the coordinator only through the public HTTP API,
// from the browser; it must not reach into the store or the API's handlers.
package web
