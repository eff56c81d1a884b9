package catalog

import (
	"slices"
	"sync"
)

// MaxChanges is the most ToolDefinitions Changes names; past it, as in a
// bulk apply, the next pass selects every ToolDefinition again.
const MaxChanges = 4096

// Changes are the ToolDefinitions of one catalog that changed since its
// last pass, as the watch saw them, so that the pass after an edit
// selects (Selector.Update) those alone. Its zero value says everything
// changed: a catalog's first pass selects whole. It is safe for
// concurrent use.
type Changes struct {
	mu      sync.Mutex
	objects map[string]bool
	// taken says a pass took the changes since the last; whole says every
	// ToolDefinition is to be looked at.
	taken, whole bool
}

// Add names ToolDefinitions that changed.
func (c *Changes) Add(objects ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.whole || !c.taken {
		return
	}
	if c.objects == nil {
		c.objects = map[string]bool{}
	}
	for _, o := range objects {
		c.objects[o] = true
	}
	if len(c.objects) > MaxChanges {
		c.whole, c.objects = true, nil
	}
}

// All says every ToolDefinition may have changed, as when a ToolSource's
// record, which decides its tools' validity, did.
func (c *Changes) All() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.whole, c.objects = true, nil
}

// Take returns the ToolDefinitions changed since the last Take, sorted,
// or whole true when any may have, and starts collecting again.
func (c *Changes) Take() (objects []string, whole bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	whole = c.whole || !c.taken
	if !whole {
		for o := range c.objects {
			objects = append(objects, o)
		}
		slices.Sort(objects)
	}
	c.taken, c.whole, c.objects = true, false, nil
	return objects, whole
}
