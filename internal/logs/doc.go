// Package logs carries a job's output from its step's pipes to readers: the worker's line
// writer and spool, the coordinator's durable storage, and the live hub readers follow.
//
// A line is {seq, ts, stream, text}; seq is dense and starts at 1 in every job attempt,
// so it doubles as the line number. The worker assigns it; the coordinator stores each
// seq once, so a re-sent batch never duplicates a line.
package logs
