package toolcatalog

import "testing"

// A "group:" entry admits the members of that group and never a user who
// bears the entry as a name; "*" admits everyone.
func TestAllows(t *testing.T) {
	for _, tt := range []struct {
		list   []string
		user   string
		groups []string
		want   bool
	}{
		{[]string{"alice"}, "alice", nil, true},
		{[]string{"alice"}, "bob", []string{"alice"}, false},
		{[]string{"group:admins"}, "bob", []string{"admins"}, true},
		{[]string{"group:admins"}, "group:admins", nil, false},
		{[]string{"group:admins"}, "group:admins", []string{"users"}, false},
		{[]string{"*"}, "anyone", nil, true},
		{nil, "alice", []string{"admins"}, false},
	} {
		if got := Allows(tt.list, tt.user, tt.groups...); got != tt.want {
			t.Errorf("Allows(%q, %q, %q) = %v, want %v", tt.list, tt.user, tt.groups, got, tt.want)
		}
	}
}
