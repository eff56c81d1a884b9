package contract

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Metadata is what is stored per tool in the P:metadata hash (public API):
// what was embedded, with which model, from which queries.
type Metadata struct {
	SpecHash         string   `json:"spec_hash"`
	Description      string   `json:"description"`
	Model            string   `json:"model"`
	Dimensions       int      `json:"dimensions"`
	SyntheticQueries []string `json:"synthetic_queries"`
	// LearnedQueries are recorded user requests folded into the tool's
	// vector, in addition to the synthetic ones.
	LearnedQueries []string  `json:"learned_queries,omitempty"`
	EmbeddedAt     time.Time `json:"embedded_at"`
}

// ParseMetadata decodes a stored entry strictly: unknown shapes and missing
// identity fields are errors, which make the tool stale.
func ParseMetadata(data string) (*Metadata, error) {
	m := &Metadata{}
	if err := unmarshalString(data, m); err != nil {
		return nil, fmt.Errorf("parsing tool metadata: %w", err)
	}
	if m.SpecHash == "" || m.Model == "" {
		return nil, fmt.Errorf("tool metadata lacks spec_hash or model")
	}
	return m, nil
}

// Marshal encodes the entry.
func (m *Metadata) Marshal() ([]byte, error) { return json.Marshal(m) }

// Equal says whether two entries hold the same content: the same
// identity, queries and embedding time.
func (m *Metadata) Equal(o *Metadata) bool {
	return m.SpecHash == o.SpecHash && m.Description == o.Description && m.Model == o.Model && m.Dimensions == o.Dimensions &&
		slices.Equal(m.SyntheticQueries, o.SyntheticQueries) && slices.Equal(m.LearnedQueries, o.LearnedQueries) && m.EmbeddedAt.Equal(o.EmbeddedAt)
}
