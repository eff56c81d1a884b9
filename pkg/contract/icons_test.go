package contract

import (
	"strings"
	"testing"
)

// Icons are shown by clients and consoles: only https URLs without
// credentials and base64 data URIs of raster images pass.
func TestCheckIcon(t *testing.T) {
	png := "data:image/png;base64,iVBORw0KGgo="
	for _, tt := range []struct {
		name string
		icon Icon
		want string // part of the error; empty for none
	}{
		{"https", Icon{Src: "https://cdn.example.com/crm.png", Sizes: []string{"48x48", "any"}, Theme: "dark"}, ""},
		{"data png", Icon{Src: png, MIMEType: "image/png"}, ""},
		{"http", Icon{Src: "http://cdn.example.com/crm.png"}, "https URL or a data URI"},
		{"javascript", Icon{Src: "javascript:alert(1)"}, "https URL or a data URI"},
		{"file", Icon{Src: "file:///etc/passwd"}, "https URL or a data URI"},
		{"credentials", Icon{Src: "https://user:secret@cdn.example.com/x.png"}, "without credentials"},
		{"no host", Icon{Src: "https:///x.png"}, "without credentials"},
		{"svg data", Icon{Src: "data:image/svg+xml;base64,PHN2Zz4="}, "base64 data URI"},
		{"html data", Icon{Src: "data:text/html;base64,PGI+"}, "base64 data URI"},
		{"not base64", Icon{Src: "data:image/png;base64,***"}, "not base64"},
		{"empty data", Icon{Src: "data:image/png;base64,"}, "not base64"},
		{"mime svg", Icon{Src: "https://cdn.example.com/x.svg", MIMEType: "image/svg+xml"}, "mimeType"},
		{"mime mismatch", Icon{Src: png, MIMEType: "image/gif"}, "not its data URI's"},
		{"size", Icon{Src: png, Sizes: []string{"huge"}}, "48x48 or any"},
		{"theme", Icon{Src: png, Theme: "neon"}, "light or dark"},
		{"too long", Icon{Src: "data:image/png;base64," + strings.Repeat("A", MaxIconSrc)}, "more than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckIcon(tt.icon)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("CheckIcon: %v, want %q", err, tt.want)
			}
		})
	}
	good := Icon{Src: png}
	if err := CheckIcons(make([]Icon, MaxIcons+1)); err == nil {
		t.Fatal("nine icons accepted")
	}
	if got := SafeIcons([]Icon{{Src: "javascript:x"}, good}); len(got) != 1 || got[0].Src != png {
		t.Fatalf("SafeIcons kept %v", got)
	}
}
