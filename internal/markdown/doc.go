// Package markdown renders the GitHub-flavoured Markdown of job summaries to HTML that is
// safe to put into a page: no script, no event handler, no URL that runs code. It does
// no I/O and knows nothing of jobs; the API decides what is rendered and for whom.
package markdown
