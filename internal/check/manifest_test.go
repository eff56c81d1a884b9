package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A bad document is a finding at its line and the documents after it are
// still read, at their own lines.
func TestReadKeepsReadingPastABadDocument(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "tools.yaml", `# a comment
apiVersion: v1
kind: ConfigMap
metadata:
  name: first
---
apiVersion: v1
kind: ConfigMap
metadata: [unclosed
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: second
  data:
    key: value
---
just a string
`)
	in := Read([]string{p}, nil, Limits{})
	if len(in.Objects) != 2 {
		t.Fatalf("read %d objects, want 2 (the first and the List's item): %+v", len(in.Objects), in.Findings)
	}
	if o := in.Objects[0]; o.Line != 2 {
		t.Errorf("the first object starts at line %d, want 2", o.Line)
	}
	second := in.Objects[1]
	if second.Line != 14 {
		t.Errorf("the List's item starts at line %d, want 14", second.Line)
	}
	if line, _ := second.Locate("data[key]"); line != 19 {
		t.Errorf("data[key] located at line %d, want 19", line)
	}
	if line, _ := second.Locate("data.missing.deeper"); line != 18 {
		t.Errorf("a missing field is located at its nearest parent, line %d, want 18", line)
	}
	if len(in.Findings) != 2 {
		t.Fatalf("findings %+v, want the bad document and the string", in.Findings)
	}
	if f := in.Findings[0]; f.Rule != RuleUnreadable || f.Line < 7 || f.Line > 10 || !strings.Contains(f.Message, "not valid YAML") {
		t.Errorf("bad document finding %+v, want TC001 between lines 7 and 10", f)
	}
	if f := in.Findings[1]; f.Line != 21 || !strings.Contains(f.Message, "not an object") {
		t.Errorf("string document finding %+v, want line 21, not an object", f)
	}
}

// Binary data, a file over the bound, a link loop and a missing path are
// each a finding; the good file beside them is still read.
func TestReadRefusesWhatIsNotAManifest(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "good.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n")
	write(t, dir, "image.yaml", "apiVersion: v1\n\x00\x01\x02")
	write(t, dir, "latin1.yml", "name: caf\xe9\n")
	write(t, dir, "big.json", `{"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "`+strings.Repeat("x", 600)+`"}}`)
	write(t, dir, "notes.txt", "not read: not a manifest's extension")
	write(t, dir, ".git/config.yaml", "not read: a hidden directory")
	if err := os.Symlink(dir, filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	in := Read([]string{dir, filepath.Join(dir, "absent.yaml")}, nil, Limits{FileBytes: 512})
	if len(in.Objects) != 1 || in.Objects[0].Content["metadata"].(map[string]any)["name"] != "good" {
		t.Fatalf("objects %+v, want only good.yaml's", in.Objects)
	}
	want := map[string]string{
		"image.yaml":    "binary data",
		"latin1.yml":    "binary data",
		"big.json":      "larger than 512 bytes",
		"loop":          "symbolic link loop",
		"dangling.yaml": "cannot follow the symbolic link",
		"absent.yaml":   "cannot read",
	}
	for _, f := range in.Findings {
		base := filepath.Base(f.File)
		if w, ok := want[base]; ok && strings.Contains(f.Message, w) && f.Rule == RuleUnreadable {
			delete(want, base)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing findings for %v among %+v", want, in.Findings)
	}
	if f := in.Findings[0]; f.File != filepath.Join(dir, "absent.yaml") && !strings.HasPrefix(f.File, dir) {
		t.Errorf("finding %+v names no file", f)
	}
}

// Standard input is read like a file, and the object bound is kept.
func TestReadStdinWithinTheObjectBound(t *testing.T) {
	var b strings.Builder
	for i := range 5 {
		b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c" + string(rune('0'+i)) + "\n")
	}
	in := Read([]string{Stdin}, strings.NewReader(b.String()), Limits{Objects: 3})
	if len(in.Objects) != 3 {
		t.Fatalf("read %d objects, want 3", len(in.Objects))
	}
	if in.Objects[2].File != Stdin || in.Objects[2].Line != 12 {
		t.Errorf("third object at %s:%d, want -:12", in.Objects[2].File, in.Objects[2].Line)
	}
	if len(in.Findings) != 1 || !strings.Contains(in.Findings[0].Message, "more than 3 objects") {
		t.Errorf("findings %+v, want one saying the rest is not read", in.Findings)
	}
}

// FuzzRead feeds the reader arbitrary bytes: it never panics, and every
// document it cannot read is a finding rather than silence.
func FuzzRead(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\n---\n- a\n---\nkind: List\nitems: [1, {a: b}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("--- |\n  text\n...\n---\n{\"a\": 1e999}\n"))
	f.Add([]byte("a: b\na: c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := Read([]string{Stdin}, strings.NewReader(string(data)), Limits{FileBytes: 1 << 16, Objects: 100})
		for _, o := range in.Objects {
			if o.Content == nil {
				t.Fatalf("an object without content: %+v", o)
			}
			o.Locate("metadata.name")
			o.Locate("spec.parameters.properties[id].enum[0]")
		}
		for _, f := range in.Findings {
			if f.Message == "" || f.Rule != RuleUnreadable {
				t.Fatalf("finding %+v", f)
			}
		}
	})
}
