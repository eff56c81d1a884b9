package published

import (
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
)

// Requests in flight are shared only by the query stores of one Redis,
// reached as one user: an answer a pass read from its catalog's Redis
// (which that catalog's author may control) is never handed to a pass of
// a catalog published elsewhere.
func TestFlightsAreSharedWithinOneRedis(t *testing.T) {
	cs := &States{}
	a := redisconn.Options{Addresses: []string{"10.0.0.1:6379"}, Mode: "standalone"}
	same := a
	other := a
	other.Addresses = []string{"10.0.0.2:6379"}
	otherUser := a
	otherUser.Password = "another"
	if cs.flightsOf(a) != cs.flightsOf(same) {
		t.Error("two stores of one Redis do not share their flights")
	}
	if cs.flightsOf(a) == cs.flightsOf(other) || cs.flightsOf(a) == cs.flightsOf(otherUser) {
		t.Error("stores of another Redis, or reached with other credentials, share flights")
	}
}
