package contract

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Icon is an image a client may show for a tool, with MCP's field names.
type Icon struct {
	// Src is an https URL or a base64 data URI of an image.
	Src      string   `json:"src"`
	MIMEType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}

// Bounds of a tool's icons.
const (
	MaxIcons      = 8
	MaxIconSrc    = 16 << 10
	MaxIconSizes  = 8
	maxIconURLLen = 2048
)

// IconTypes are the image types an icon may be. SVG is not one: an SVG
// can carry scripts, and consoles and clients render icons.
var IconTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

var (
	iconSize = regexp.MustCompile(`^([1-9][0-9]{0,3}x[1-9][0-9]{0,3}|any)$`)
	dataURI  = regexp.MustCompile(`^data:(image/[a-z+.-]+);base64,(.*)$`)
)

// CheckIcon says what is wrong with an icon, nil when nothing is: its src
// must be an https URL without credentials, or a base64 data URI of one of
// IconTypes that decodes, of at most MaxIconSrc characters; mimeType, when
// set, one of IconTypes (and the data URI's); sizes like 48x48 or any;
// theme light or dark.
func CheckIcon(i Icon) error {
	if i.MIMEType != "" && !slices.Contains(IconTypes, i.MIMEType) {
		return fmt.Errorf("icon mimeType %q is not one of %s", i.MIMEType, strings.Join(IconTypes, ", "))
	}
	switch {
	case len(i.Src) > MaxIconSrc:
		return fmt.Errorf("icon src is %d characters, more than %d", len(i.Src), MaxIconSrc)
	case strings.HasPrefix(i.Src, "https://"):
		u, err := url.Parse(i.Src)
		if err != nil || u.Host == "" || u.User != nil || len(i.Src) > maxIconURLLen {
			return errors.New("icon src is not an https URL without credentials of at most 2048 characters")
		}
	case strings.HasPrefix(i.Src, "data:"):
		m := dataURI.FindStringSubmatch(i.Src)
		if m == nil || !slices.Contains(IconTypes, m[1]) {
			return fmt.Errorf("icon src is not a base64 data URI of %s", strings.Join(IconTypes, ", "))
		}
		if _, err := base64.StdEncoding.DecodeString(m[2]); err != nil || m[2] == "" {
			return errors.New("icon src is a data URI whose data is not base64")
		}
		if i.MIMEType != "" && i.MIMEType != m[1] {
			return fmt.Errorf("icon mimeType %s is not its data URI's %s", i.MIMEType, m[1])
		}
	default:
		return errors.New("icon src must be an https URL or a data URI of an image")
	}
	if len(i.Sizes) > MaxIconSizes {
		return fmt.Errorf("an icon has %d sizes, more than %d", len(i.Sizes), MaxIconSizes)
	}
	for _, s := range i.Sizes {
		if !iconSize.MatchString(s) {
			return fmt.Errorf("icon size %q is not like 48x48 or any", s)
		}
	}
	if i.Theme != "" && i.Theme != "light" && i.Theme != "dark" {
		return fmt.Errorf("icon theme %q is not light or dark", i.Theme)
	}
	return nil
}

// CheckIcons checks a tool's icons: at most MaxIcons, each by CheckIcon.
func CheckIcons(icons []Icon) error {
	if len(icons) > MaxIcons {
		return fmt.Errorf("%d icons, more than %d", len(icons), MaxIcons)
	}
	for n, i := range icons {
		if err := CheckIcon(i); err != nil {
			return fmt.Errorf("icon %d: %w", n+1, err)
		}
	}
	return nil
}

// SafeIcons keeps the icons CheckIcon accepts, at most MaxIcons: what a
// reader shows of icons it did not check itself.
func SafeIcons(icons []Icon) []Icon {
	var out []Icon
	for _, i := range icons {
		if len(out) < MaxIcons && CheckIcon(i) == nil {
			out = append(out, i)
		}
	}
	return out
}
