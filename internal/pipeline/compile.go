package pipeline

// Limits protect a server from definitions that are too large or built to be expensive.
type Limits struct {
	MaxBytes int // size of the document; default 1 MiB
	MaxJobs  int // jobs after matrix expansion; default 5,000
	MaxDepth int // nesting of YAML collections; default 64
	// MaxNodes bounds the nodes visited while decoding, each alias expansion counted
	// again, which defeats alias bombs; default 1,000,000.
	MaxNodes int
}

// DefaultLimits are the limits used for zero fields of Options.Limits.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxJobs: 5000, MaxDepth: 64, MaxNodes: 1_000_000}

// Options tune Compile.
type Options struct {
	Limits Limits
}

// Compile decodes, validates and plans a pipeline definition given as YAML or JSON. When
// the definition has mistakes it returns a nil plan and Errors listing every one of them.
func Compile(src []byte, opts Options) (*Plan, error) {
	return nil, Errors{{Kind: ErrSyntax, Message: "not implemented yet"}}
}
