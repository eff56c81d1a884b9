package evaluation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// TermWeight is the candidate model's term half's share of a similarity
// (docs/search.md, "A candidate model").
const TermWeight = 0.25

// TermsRecipe says how FitTerms fits terms.
const TermsRecipe = "document frequencies of the Snowball stems (stopwords left out) of the builtin query generator's 5 queries per tool of each tools.json; weight ln((docs+1)/(df+1))"

// FitTerms fits terms on the tools of the datasets in dirs, as a catalog
// embeds them: each tool's document is the builtin query generator's
// queries of it.
func FitTerms(ctx context.Context, dirs []string, weight float64) (*embedding.Terms, error) {
	var docs [][]string
	data := map[string]string{}
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "tools.json"))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		data[filepath.Base(dir)+"/tools.json"] = hex.EncodeToString(sum[:])
		ds, err := LoadDataset(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		for _, t := range ds.Tools {
			qs, err := embedding.TemplateQueryGenerator{}.GenerateQueries(ctx, embedding.QueryRequest{
				Tool:  embedding.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
				Count: catalog.ExpectedQueries(5, nil)})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			docs = append(docs, qs)
		}
	}
	return embedding.FitTerms(docs, weight, TermsRecipe, data)
}

// HeldOutEmbedder is the candidate model: the builtin model beside terms
// fitted on every dataset under benchDir but leave, their half weighing
// weight. Measured on leave, it is what terms fitted on public sets
// would be to a catalog they were not fitted on.
func HeldOutEmbedder(ctx context.Context, benchDir, leave string, weight float64) (embedding.TermsEmbedder, error) {
	sets, err := Datasets(benchDir)
	if err != nil {
		return embedding.TermsEmbedder{}, err
	}
	var others []string
	for _, dir := range sets {
		if filepath.Base(dir) != leave {
			others = append(others, dir)
		}
	}
	if len(others) == len(sets) {
		return embedding.TermsEmbedder{}, fmt.Errorf("%s holds no dataset %s", benchDir, leave)
	}
	terms, err := FitTerms(ctx, others, weight)
	return embedding.TermsEmbedder{Base: embedding.SentenceEmbedder{}, Terms: terms}, err
}

// Datasets lists the dataset directories (with a tools.json) in dir,
// sorted.
func Datasets(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if _, statErr := os.Stat(filepath.Join(path, "tools.json")); e.IsDir() && statErr == nil {
			out = append(out, path)
		}
	}
	return out, nil
}
