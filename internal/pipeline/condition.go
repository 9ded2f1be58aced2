package pipeline

// Condition is a compiled `if:` expression. It marshals to JSON as its source text.
type Condition struct {
	Source string
}
