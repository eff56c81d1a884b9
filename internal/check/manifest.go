package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Limits bound what Read takes in.
type Limits struct {
	// FileBytes bounds one file (or standard input); DefaultFileBytes
	// when 0.
	FileBytes int64
	// Objects bounds the objects read in all; DefaultObjects when 0.
	Objects int
}

// Defaults of Limits.
const (
	DefaultFileBytes = 16 << 20
	DefaultObjects   = 200_000
)

// Stdin is how standard input is named among the paths and in findings.
const Stdin = "-"

// Object is one object of the input, with where it was found.
type Object struct {
	// File is the path as found under the path given, "-" for standard
	// input; Line and Column are the object's start (1-based).
	File         string
	Line, Column int
	// Content is the object as JSON values (what the API server decodes).
	Content map[string]any

	// src is the YAML document the object is in, offset the lines before
	// it in its file, and items the indexes that lead to the object in
	// the items of Lists. The document is parsed again for positions only
	// when a finding needs one.
	src    []byte
	offset int
	items  []int
	once   sync.Once
	node   *yamlv3.Node
}

// root is the object's YAML mapping, at the lines of its file; nil when
// it cannot be found.
func (o *Object) root() *yamlv3.Node {
	o.once.Do(func() {
		var doc yamlv3.Node
		if yamlv3.Unmarshal(o.src, &doc) != nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) == 0 {
			return
		}
		n := doc.Content[0]
		for _, i := range o.items {
			if n = child(n, "items"); n == nil {
				return
			}
			if n = child(n, strconv.Itoa(i)); n == nil {
				return
			}
		}
		o.node = shift(n, o.offset)
	})
	return o.node
}

// Locate returns the line and column of the field at path (a field path
// as the API server writes it: spec.parameters.properties[id]), or of
// the nearest of its parents the object has.
func (o *Object) Locate(path string) (line, column int) {
	line, column = o.Line, o.Column
	n := o.root()
	if n == nil {
		return line, column
	}
	for _, step := range fieldSteps(path) {
		next := child(n, step)
		if next == nil {
			break
		}
		n = next
		line, column = n.Line, n.Column
	}
	return line, column
}

// child is the node a step leads to from n: a mapping's key (pointing at
// the key, where an editor shows it) or a sequence's index.
func child(n *yamlv3.Node, step string) *yamlv3.Node {
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == step {
				if v := n.Content[i+1]; v.Kind == yamlv3.MappingNode || v.Kind == yamlv3.SequenceNode {
					// Keep going inside, but a stop here points at the key.
					return &yamlv3.Node{Kind: v.Kind, Content: v.Content, Line: n.Content[i].Line, Column: n.Content[i].Column}
				}
				return n.Content[i]
			}
		}
	case yamlv3.SequenceNode:
		if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

// fieldSteps splits a field path into its keys and indexes.
func fieldSteps(path string) []string {
	var steps []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if cur.Len() > 0 {
			steps = append(steps, cur.String())
			cur.Reset()
		}
	}
	for _, r := range path {
		switch {
		case r == '[' && depth == 0:
			flush()
			depth++
		case r == ']' && depth == 1:
			flush()
			depth--
		case r == '.' && depth == 0:
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return steps
}

// Input is what Read found: the objects, and a finding for each file or
// document that could not be read.
type Input struct {
	Objects  []*Object
	Findings []Finding
}

// Read reads the objects of every YAML or JSON file at paths: files,
// directories (recursively, *.yaml, *.yml and *.json, following symbolic
// links but not loops) and "-" for stdin. What cannot be read becomes a
// finding and the rest is still read.
func Read(paths []string, stdin io.Reader, lim Limits) *Input {
	r := &reader{lim: lim, in: &Input{}}
	if r.lim.FileBytes <= 0 {
		r.lim.FileBytes = DefaultFileBytes
	}
	if r.lim.Objects <= 0 {
		r.lim.Objects = DefaultObjects
	}
	for _, p := range paths {
		if p == Stdin {
			r.readFrom(Stdin, stdin)
			continue
		}
		r.walk(p, nil)
	}
	return r.in
}

type reader struct {
	lim  Limits
	in   *Input
	full bool
}

func (r *reader) fail(file string, line int, format string, args ...any) {
	r.in.Findings = append(r.in.Findings, Finding{Rule: RuleUnreadable, File: file, Line: line, Column: 1, Message: fmt.Sprintf(format, args...)})
}

// walk reads a file, or a directory's files; ancestors are the
// directories being walked, to tell a loop of links.
func (r *reader) walk(path string, ancestors []os.FileInfo) {
	info, err := os.Stat(path)
	if err != nil {
		r.fail(path, 0, "cannot read: %v", unwrapPath(err))
		return
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			r.fail(path, 0, "not a regular file")
			return
		}
		f, openErr := os.Open(path)
		if openErr != nil {
			r.fail(path, 0, "cannot read: %v", unwrapPath(openErr))
			return
		}
		defer func() { _ = f.Close() }()
		r.readFrom(path, f)
		return
	}
	for _, a := range ancestors {
		if os.SameFile(a, info) {
			r.fail(path, 0, "a symbolic link loop: this directory is already being read")
			return
		}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		r.fail(path, 0, "cannot read: %v", unwrapPath(err))
		return
	}
	ancestors = append(ancestors, info)
	for _, e := range entries {
		name := e.Name()
		full := filepath.Join(path, name)
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Stat(full)
			if err != nil {
				r.fail(full, 0, "cannot follow the symbolic link: %v", unwrapPath(err))
				continue
			}
			isDir = target.IsDir()
		}
		switch {
		case isDir && strings.HasPrefix(name, "."):
			// .git and the like hold no manifests.
		case isDir:
			r.walk(full, ancestors)
		case manifestFile(name):
			r.walk(full, ancestors)
		}
	}
}

func manifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func unwrapPath(err error) error {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readFrom reads one file's documents.
func (r *reader) readFrom(file string, src io.Reader) {
	data, err := io.ReadAll(io.LimitReader(src, r.lim.FileBytes+1))
	if err != nil {
		r.fail(file, 0, "cannot read: %v", unwrapPath(err))
		return
	}
	if int64(len(data)) > r.lim.FileBytes {
		r.fail(file, 0, "larger than %d bytes (--max-file-size): not read", r.lim.FileBytes)
		return
	}
	if line, ok := binary(data); ok {
		r.fail(file, line, "binary data, not YAML or JSON")
		return
	}
	for _, doc := range splitDocuments(data) {
		r.readDocument(file, doc)
	}
}

// binary reports whether data is not text, and the line where that shows.
func binary(data []byte) (int, bool) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return 1 + bytes.Count(data[:i], []byte("\n")), true
	}
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				return 1 + bytes.Count(data[:i], []byte("\n")), true
			}
			i += size
		}
	}
	return 0, false
}

// document is one YAML document of a file and the line it starts on.
type document struct {
	data []byte
	line int
}

// splitDocuments cuts a stream at its document markers ("---" at the
// start of a line), so that a document that cannot be parsed does not
// keep the others from being read.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, line := 1, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if bytes.HasPrefix(text, []byte("---")) && (len(text) == 3 || text[3] == ' ' || text[3] == '\t') {
			docs = append(docs, document{data: bytes.Clone(cur.Bytes()), line: start})
			cur.Reset()
			// What follows the marker on its line belongs to the
			// document, which then starts on that line.
			cur.Write(bytes.TrimLeft(text[3:], " \t"))
			cur.WriteByte('\n')
			start = line
			if len(bytes.TrimSpace(text[3:])) == 0 {
				cur.Reset()
				start = line + 1
			}
			continue
		}
		cur.Write(text)
		cur.WriteByte('\n')
	}
	return append(docs, document{data: cur.Bytes(), line: start})
}

// yamlLine finds the line a YAML parser's error names.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// readDocument reads one document: an object, a List of objects, or
// nothing (comments only). The JSON values are sigs.k8s.io/yaml's, as
// kubectl reads a manifest (YAML 1.1: an unquoted yes is true).
func (r *reader) readDocument(file string, doc document) {
	raw, err := yaml.YAMLToJSONStrict(doc.data)
	if err != nil {
		r.failParse(file, doc, err)
		return
	}
	var content any
	if err := utiljson.Unmarshal(raw, &content); err != nil {
		r.failParse(file, doc, err)
		return
	}
	if content == nil {
		return
	}
	start := doc.line + firstLine(doc.data)
	obj, ok := content.(map[string]any)
	if !ok {
		r.fail(file, start, "not an object: a manifest is a YAML mapping with apiVersion and kind")
		return
	}
	r.add(&Object{File: file, Line: start, Column: 1, Content: obj, src: doc.data, offset: doc.line - 1})
}

// firstLine is the index of the first line of data that holds YAML (not
// blank, not a comment).
func firstLine(data []byte) int {
	i := 0
	for line := range bytes.Lines(data) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return i
		}
		i++
	}
	return 0
}

// add adds an object, or the items of a List, located by parsing the
// document.
func (r *reader) add(o *Object) {
	if kind, _ := o.Content["kind"].(string); kind == "List" || strings.HasSuffix(kind, "List") && o.Content["items"] != nil {
		items, _ := o.Content["items"].([]any)
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				r.fail(o.File, o.Line, "items[%d] of a %s is not an object", i, kind)
				continue
			}
			it := &Object{File: o.File, Content: m, src: o.src, offset: o.offset, items: append(slices.Clone(o.items), i)}
			it.Line, it.Column = o.Line, o.Column
			if n := it.root(); n != nil {
				it.Line, it.Column = n.Line, n.Column
			}
			r.add(it)
		}
		return
	}
	if len(r.in.Objects) >= r.lim.Objects {
		if !r.full {
			r.full = true
			r.fail(o.File, o.Line, "more than %d objects (--max-objects): the rest is not read", r.lim.Objects)
		}
		return
	}
	r.in.Objects = append(r.in.Objects, o)
}

// shift moves a document's node tree to the lines of its file.
func shift(n *yamlv3.Node, offset int) *yamlv3.Node {
	if offset == 0 {
		return n
	}
	var walk func(*yamlv3.Node)
	seen := map[*yamlv3.Node]bool{}
	walk = func(n *yamlv3.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		n.Line += offset
		for _, c := range n.Content {
			walk(c)
		}
		walk(n.Alias)
	}
	walk(n)
	return n
}

func (r *reader) failParse(file string, doc document, err error) {
	msg := err.Error()
	line := doc.line
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			line = doc.line + n - 1
			msg = strings.Replace(msg, m[0], "line "+strconv.Itoa(line), 1)
		}
	}
	r.fail(file, line, "not valid YAML: %s", msg)
}

// sortFindings orders findings by file, line, column and rule.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Rule < b.Rule
	})
}
