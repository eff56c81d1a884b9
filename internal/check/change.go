package check

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
)

// Change is what a change from a base costs the cluster, per catalog.
type Change struct {
	// Base names the base: a git ref or a directory.
	Base     string          `json:"base"`
	Catalogs []CatalogChange `json:"catalogs"`
}

// CatalogChange is what a change costs one catalog. The requests are an
// upper bound: offline the check cannot see which query sets the
// namespace's query store already holds.
type CatalogChange struct {
	Catalog string `json:"catalog"`
	// New says the catalog is not in the base.
	New bool `json:"new,omitempty"`
	// Added, Removed and Changed name the tools the catalog gains, loses
	// and re-embeds (their spec hash changes).
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// QueriesToGenerate and TextsToEmbed count the work of the added and
	// changed tools; GenerationRequests and EmbeddingRequests the
	// provider requests it takes (0 with the builtin providers, which
	// run in the manager).
	QueriesToGenerate  int `json:"queriesToGenerate"`
	TextsToEmbed       int `json:"textsToEmbed"`
	GenerationRequests int `json:"generationRequests"`
	EmbeddingRequests  int `json:"embeddingRequests"`
	// ConfusableAdded and ConfusableRemoved are the confusable pairs the
	// change introduces and removes, when graded.
	ConfusableAdded   []selfgrade.ConfusablePair `json:"confusableAdded,omitempty"`
	ConfusableRemoved []selfgrade.ConfusablePair `json:"confusableRemoved,omitempty"`
}

// change compares each catalog of the input with the same catalog of the
// base (decoded and selected as the input is).
func (c *checker) change(label string, baseSel map[string]*selected, baseRuns map[string]*gradeRun, head []*selected, headGrades []CatalogGrade) *Change {
	graded := map[string]CatalogGrade{}
	for _, g := range headGrades {
		graded[g.Catalog] = g
	}
	out := &Change{Base: label}
	for _, s := range head {
		name := objectName(s.catalog.TC)
		cc := CatalogChange{Catalog: name}
		was := map[string]string{}
		if b := baseSel[name]; b != nil {
			for _, t := range b.selection.Tools {
				was[t.Entry.Name] = t.Entry.SpecHash
			}
		} else {
			cc.New = true
		}
		is := map[string]bool{}
		spec := s.catalog.TC.Spec
		perTool := catalogconfig.QueriesPerTool(spec)
		for _, t := range s.selection.Tools {
			is[t.Entry.Name] = true
			hash, ok := was[t.Entry.Name]
			switch {
			case !ok:
				cc.Added = append(cc.Added, t.Entry.Name)
			case hash != t.Entry.SpecHash:
				cc.Changed = append(cc.Changed, t.Entry.Name)
			default:
				continue
			}
			queries := catalog.ExpectedQueries(perTool, t.Examples)
			cc.QueriesToGenerate += queries - len(t.Examples)
			cc.TextsToEmbed += queries
			if spec.QueryGeneration.Provider == v1alpha1.ProviderOpenAI {
				cc.GenerationRequests++
			}
		}
		for n := range was {
			if !is[n] {
				cc.Removed = append(cc.Removed, n)
			}
		}
		slices.Sort(cc.Removed)
		if spec.Embedding.Provider == v1alpha1.ProviderOpenAI && cc.TextsToEmbed > 0 {
			batch := int(spec.Embedding.BatchSize)
			if batch <= 0 {
				batch = embedding.DefaultBatchSize
			}
			cc.EmbeddingRequests = (cc.TextsToEmbed + batch - 1) / batch
		}
		if g, ok := graded[name]; ok && baseRuns != nil {
			var before []selfgrade.ConfusablePair
			if b := baseRuns[name]; b != nil {
				before = b.grade.Confusable
			}
			cc.ConfusableAdded, cc.ConfusableRemoved = pairsDiff(before, g.Confusable)
		}
		out.Catalogs = append(out.Catalogs, cc)
		if n := len(cc.Added) + len(cc.Changed) + len(cc.Removed); n > 0 || cc.New {
			c.at(s.catalog.Object, "spec", Finding{Rule: RuleChangeCost, Object: name, Catalog: name, Message: cc.summary()})
		}
	}
	return out
}

// gradeBase grades each catalog of the base, by name; a catalog that
// cannot be graded is left out (its version after the change is then
// graded whole).
func gradeBase(ctx context.Context, baseSel map[string]*selected) map[string]*gradeRun {
	list := make([]*selected, 0, len(baseSel))
	for _, s := range baseSel {
		list = append(list, s)
	}
	runs, errs := gradeAll(ctx, list, nil)
	out := map[string]*gradeRun{}
	for i, run := range runs {
		if errs[i] == nil {
			out[objectName(list[i].catalog.TC)] = run
		}
	}
	return out
}

// selectBase decodes and selects the base as the input is, its findings
// dropped: each catalog's selection by name.
func (c *checker) selectBase(ctx context.Context, base *Input) map[string]*selected {
	quiet := &checker{opts: c.opts, schemas: c.schemas}
	baseSet, _ := quiet.decode(ctx, base.Objects)
	out := map[string]*selected{}
	for _, s := range quiet.selections(baseSet) {
		out[objectName(s.catalog.TC)] = s
	}
	return out
}

func (cc CatalogChange) summary() string {
	msg := fmt.Sprintf("against the base: %d tools added, %d changed (re-embedded), %d removed; up to %d queries to generate and %d texts to embed (%d generation and %d embedding requests)",
		len(cc.Added), len(cc.Changed), len(cc.Removed), cc.QueriesToGenerate, cc.TextsToEmbed, cc.GenerationRequests, cc.EmbeddingRequests)
	if cc.New {
		msg = "a new catalog; " + msg
	}
	if len(cc.ConfusableAdded)+len(cc.ConfusableRemoved) > 0 {
		msg += fmt.Sprintf("; confusable pairs introduced: %s; resolved: %s", pairNames(cc.ConfusableAdded), pairNames(cc.ConfusableRemoved))
	}
	return msg
}

func pairNames(pairs []selfgrade.ConfusablePair) string {
	if len(pairs) == 0 {
		return "none"
	}
	names := make([]string, len(pairs))
	for i, p := range pairs {
		names[i] = p.A + "/" + p.B
	}
	return strings.Join(names, ", ")
}

// pairsDiff lists the pairs of after not in before, and of before not in
// after.
func pairsDiff(before, after []selfgrade.ConfusablePair) (added, removed []selfgrade.ConfusablePair) {
	key := func(p selfgrade.ConfusablePair) string { return p.A + "\x00" + p.B }
	had := map[string]bool{}
	for _, p := range before {
		had[key(p)] = true
	}
	has := map[string]bool{}
	for _, p := range after {
		has[key(p)] = true
		if !had[key(p)] {
			added = append(added, p)
		}
	}
	for _, p := range before {
		if !has[key(p)] {
			removed = append(removed, p)
		}
	}
	return added, removed
}

func writeChangeText(w io.Writer, ch *Change) {
	for _, cc := range ch.Catalogs {
		fmt.Fprintf(w, "%s (against %s): %s\n", cc.Catalog, ch.Base, cc.summary())
		for _, list := range []struct {
			what  string
			names []string
		}{{"added", cc.Added}, {"changed", cc.Changed}, {"removed", cc.Removed}} {
			if len(list.names) > 0 {
				fmt.Fprintf(w, "  %s: %s\n", list.what, catalog.ListNames(list.names))
			}
		}
	}
}

// BaseDir maps the paths given to the same paths under dir, a copy of
// the tree they are in at the base: each path relative to the working
// directory is taken relative to dir.
func BaseDir(dir string, paths []string) ([]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == Stdin {
			return nil, errors.New("standard input has no base: give files or directories")
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(wd, abs)
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			return nil, fmt.Errorf("%s is outside the working directory: run the check from the repository's root", p)
		}
		out = append(out, filepath.Join(dir, rel))
	}
	return out, nil
}

// GitBase writes the paths as they are at ref of the git repository the
// working directory is in to a new directory, and returns the paths
// there (a path the ref does not have is left out) and a cleanup.
func GitBase(ctx context.Context, ref string, paths []string, lim Limits) (base []string, cleanup func(), err error) {
	if strings.HasPrefix(ref, "-") {
		return nil, nil, fmt.Errorf("--base %q is not a git ref", ref)
	}
	git := func(args ...string) ([]byte, error) {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Stderr = &stderr
		out, runErr := cmd.Output()
		if runErr != nil {
			return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), runErr, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return nil, nil, err
	}
	root := strings.TrimSpace(string(top))
	if _, refErr := git("rev-parse", "--verify", "--quiet", ref+"^{commit}"); refErr != nil {
		return nil, nil, fmt.Errorf("--base %s names no commit of this repository", ref)
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "toolcatalog-check-base-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	fail := func(err error) ([]string, func(), error) {
		cleanup()
		return nil, nil, err
	}
	inRepo, err := filepath.Rel(root, wd)
	if err != nil {
		return fail(err)
	}
	mapped, err := BaseDir(filepath.Join(dir, inRepo), paths)
	if err != nil {
		return fail(err)
	}
	for i, p := range paths {
		rel, err := filepath.Rel(dir, mapped[i])
		if err != nil {
			return fail(err)
		}
		spec := filepath.ToSlash(rel)
		// A path the base does not have is a path the change adds.
		if _, missing := git("-C", root, "cat-file", "-e", ref+":"+strings.TrimSuffix(spec, "/.")); missing != nil && spec != "." {
			continue
		}
		archive, err := git("-C", root, "archive", "--format=tar", ref, "--", spec)
		if err != nil {
			return fail(err)
		}
		if err := untar(bytes.NewReader(archive), dir, lim); err != nil {
			return fail(fmt.Errorf("reading %s at %s: %w", p, ref, err))
		}
	}
	return mapped, cleanup, nil
}

// untar writes the regular files and directories of a git archive (its
// paths relative to the repository's root) under dir.
func untar(r io.Reader, dir string, lim Limits) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := h.Name
		if name == "" || !filepath.IsLocal(filepath.FromSlash(name)) {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			size := min(h.Size, lim.FileBytes+1)
			if lim.FileBytes <= 0 {
				size = min(h.Size, DefaultFileBytes+1)
			}
			data, err := io.ReadAll(io.LimitReader(tr, size))
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, 0o644); err != nil {
				return err
			}
		}
	}
}
