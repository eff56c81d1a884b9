package check

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A base's archive writes under its directory only: names that climb
// out, absolute names and links are dropped, and a file is cut at the
// size bound.
func TestUntarStaysInItsDirectory(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	dir := filepath.Join(root, "base")
	add(&tar.Header{Name: "tools/good.yaml", Mode: 0o644}, "kind: ToolDefinition\n")
	add(&tar.Header{Name: "../escaped.yaml", Mode: 0o644}, "out")
	add(&tar.Header{Name: filepath.Join(root, "absolute.yaml"), Mode: 0o644}, "out")
	add(&tar.Header{Name: "tools/link.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "")
	add(&tar.Header{Name: "tools/big.yaml", Mode: 0o644}, "0123456789")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := untar(&buf, dir, Limits{FileBytes: 4}); err != nil {
		t.Fatal(err)
	}
	// One byte past the bound, so the reader reports the file as too large.
	if raw, err := os.ReadFile(filepath.Join(dir, "tools", "good.yaml")); err != nil || string(raw) != "kind:" {
		t.Errorf("tools/good.yaml: %q, %v, want its first 5 bytes", raw, err)
	}
	for _, p := range []string{filepath.Join(root, "escaped.yaml"), filepath.Join(root, "absolute.yaml"), filepath.Join(dir, "tools", "link.yaml")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "tools", "big.yaml")); len(raw) > 5 {
		t.Errorf("tools/big.yaml holds %d bytes past the bound", len(raw))
	}
}
