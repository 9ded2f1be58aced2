// Package toolchain picks, among the toolchains installed where a job's steps run, the
// one an actions/setup-go, setup-node or setup-python step asks for, by the action's own
// version rules, and reads the version files those actions read. It never downloads a
// toolchain and runs nothing: the worker runs Probe's script and hands its output here.
package toolchain
