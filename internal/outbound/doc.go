// Package outbound owns where the coordinator's own HTTP requests (commit statuses and
// outbound webhooks) may go: never into its private network unless the admin allows it.
// It decides on the address actually dialed; it does not decide what is sent.
package outbound
