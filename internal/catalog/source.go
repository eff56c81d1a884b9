package catalog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Sources finds a ToolSource of the namespace being reconciled by name;
// nil when there is none.
type Sources func(name string) *v1alpha1.ToolSource

// ErrSourceUnconfirmed is wrapped by ValidateSource's error for a
// ToolDefinition made after its source's last sync that the source has
// not recorded yet: its own creation, which the sync under way records,
// or one written by somebody else, which the next sync refuses.
var ErrSourceUnconfirmed = errors.New("not yet recorded by its ToolSource")

// ErrImportEdited is wrapped by ValidateSource's error for a
// ToolDefinition a source created whose spec is not one the source wrote.
var ErrImportEdited = errors.New("edited by somebody other than the ToolSource that imported it")

// ValidateSource refuses a ToolDefinition that names a ToolSource without
// being one the source created: a ToolSource's credentials reach its
// server only for the tools it imported. What proves that is the source's
// own record (Created), which only the operator writes, never an owner
// reference or label, which anyone who may write ToolDefinitions can. A
// hand-written ToolDefinition names a server with spec.source.mcpURL
// alone, and no credentials go with it. source is the named ToolSource,
// nil when it does not exist.
func ValidateSource(td *v1alpha1.ToolDefinition, source *v1alpha1.ToolSource) error {
	src := td.Spec.Source
	if src == nil || src.ToolSource == "" {
		return nil
	}
	notCreated := fmt.Errorf("spec.source.toolSource names ToolSource %s, which did not create this ToolDefinition: only a ToolSource's own tools use its connection and credentials; remove spec.source.toolSource and set spec.source.mcpURL for a tool written by hand", src.ToolSource)
	switch {
	case source == nil || source.Name != src.ToolSource:
		return notCreated
	case Created(source, td):
		if !controlledBy(td, source) {
			return fmt.Errorf("ToolSource %s created this ToolDefinition, but its owner reference to the source was changed: the source puts it back at its next sync", src.ToolSource)
		}
		if !Unedited(source, td) {
			return fmt.Errorf("this ToolDefinition was %w (%s): catalogs do not serve the edit (they keep the version they published), and the source writes back what it imported at its next sync; change an imported tool on its MCP server, or through the ToolSource's spec", ErrImportEdited, src.ToolSource)
		}
		return nil
	case controlledBy(td, source) && unsynced(source, td):
		return fmt.Errorf("ToolSource %s %w: catalogs leave it out until the source's sync records it as one it created", src.ToolSource, ErrSourceUnconfirmed)
	}
	return notCreated
}

// Created reports whether source created td: td's UID is in the source's
// record (status.imported), which only the operator writes. A source last
// synced by a version that kept no record counts as having created what
// it controlled before that sync, and nothing made since.
func Created(source *v1alpha1.ToolSource, td *v1alpha1.ToolDefinition) bool {
	if rec := source.Status.Imported; rec != nil {
		_, found := slices.BinarySearch(rec.UIDs, td.UID)
		return found && td.UID != ""
	}
	last := source.Status.LastSyncTime
	return last != nil && controlledBy(td, source) && td.CreationTimestamp.Before(last)
}

// Unedited reports whether td's spec is one source wrote to it, by the
// hashes of its record (status.imported.specs), which only the operator
// writes. A record from before specs were recorded, an entry without one
// (carried over from such a record), or a record that does not hold td,
// vouches for nothing here: Created decides those.
func Unedited(source *v1alpha1.ToolSource, td *v1alpha1.ToolDefinition) bool {
	rec := source.Status.Imported
	if rec == nil || len(rec.Specs) != len(rec.UIDs) {
		return true
	}
	i, found := slices.BinarySearch(rec.UIDs, td.UID)
	if !found || rec.Specs[i] == "" {
		return true
	}
	return slices.Contains(strings.Fields(rec.Specs[i]), writtenHashOf(td))
}

// writtenHashes keeps WrittenHash by UID and generation, which name one
// spec for good: every sync of a source changes its status, and each
// change has the ToolDefinition reconciler and the catalogs look at every
// tool it imported again (18 µs a hash, 10,000 a sync of 5,000 tools).
var writtenHashes = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// maxWrittenHashes bounds writtenHashes; past it the map starts over.
const maxWrittenHashes = 200_000

// writtenHashOf is WrittenHash of td's spec, kept for an object the API
// server stored (a generation above 0).
func writtenHashOf(td *v1alpha1.ToolDefinition) string {
	if td.Generation <= 0 || td.UID == "" {
		return WrittenHash(td.Spec)
	}
	key := string(td.UID) + "/" + strconv.FormatInt(td.Generation, 10)
	writtenHashes.Lock()
	h, ok := writtenHashes.m[key]
	writtenHashes.Unlock()
	if ok {
		return h
	}
	h = WrittenHash(td.Spec)
	writtenHashes.Lock()
	if len(writtenHashes.m) >= maxWrittenHashes {
		clear(writtenHashes.m)
	}
	writtenHashes.m[key] = h
	writtenHashes.Unlock()
	return h
}

// WrittenHash identifies a ToolDefinition's whole spec as a source writes
// it: what the model reads, and what decides where a call goes and who may
// make it (spec.source, spec.permissions). 128 bits of SHA-256 over its
// canonical JSON, in unpadded base64url.
func WrittenHash(spec v1alpha1.ToolDefinitionSpec) string {
	raw, err := json.Marshal(spec)
	if err == nil {
		raw, err = contract.CanonicalJSON(raw)
	}
	if err != nil {
		// A spec the API server stored always encodes; one that does
		// not matches no record.
		return "unencodable"
	}
	sum := sha256.Sum256(raw)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// unsynced reports whether td was made after source's last sync, so that
// no sync of the source has yet had the chance to record it.
func unsynced(source *v1alpha1.ToolSource, td *v1alpha1.ToolDefinition) bool {
	last := source.Status.LastSyncTime
	return last == nil || td.CreationTimestamp.After(last.Time)
}

// controlledBy reports whether td's controller reference names source, by
// its UID too, so a source deleted and made again does not inherit what
// the old one left.
func controlledBy(td *v1alpha1.ToolDefinition, source *v1alpha1.ToolSource) bool {
	owner := metav1.GetControllerOf(td)
	return owner != nil && owner.Kind == "ToolSource" && owner.APIVersion == v1alpha1.GroupVersion.String() &&
		owner.Name == source.Name && owner.UID == source.UID
}
